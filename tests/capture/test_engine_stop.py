"""Pause, resume and stop: in-flight requests drain or are aborted, and what finished is
always in complete shards."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support.waiting import async_wait_until
from test_engine_fakes import FakeSGLang, bundled_tokenizer, make_config, rows_of, write_prompts

from eagle_tui.core.capture.engine import CaptureEngine
from eagle_tui.core.capture.events import CaptureEvent
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.tokenizer import LoadedTokenizer


@pytest.fixture
def tokenizer() -> LoadedTokenizer:
    return bundled_tokenizer()


def engine_for(config: object, fake: FakeSGLang, tokenizer: LoadedTokenizer,
               events: list[CaptureEvent] | None = None) -> CaptureEngine:
    return CaptureEngine(config, tokenizer=tokenizer,  # type: ignore[arg-type]
                         event_sink=None if events is None else events.append,
                         client_factory=lambda url: fake.client())


async def until_in_flight(fake: FakeSGLang, count: int) -> None:
    await async_wait_until(lambda: fake.in_flight >= count, 30, f"{count} requests in flight",
                           every=0.005)


def hanging_after(answered: int) -> FakeSGLang:
    """A server that answers the first ``answered`` requests and never the rest."""
    fake = FakeSGLang()
    fake.fault_for = lambda prompt: "hang" if len(fake.generate_bodies) > answered else None
    return fake


def committed_rows(out_dir: Path) -> int:
    manifest = Manifest.load_optional(out_dir)
    return 0 if manifest is None else manifest.counts.done


async def test_stop_lets_in_flight_finish_within_grace(
    tmp_path: Path, tokenizer: LoadedTokenizer
) -> None:
    fake = FakeSGLang()
    fake.gate = asyncio.Event()
    write_prompts(tmp_path / "prompts.jsonl", 50)
    config = make_config(tmp_path, [fake.url], concurrency=4, stop_grace_s=60.0)
    engine = engine_for(config, fake, tokenizer)
    run = asyncio.ensure_future(engine.run())
    await until_in_flight(fake, 4)
    engine.stop()
    await asyncio.sleep(0)
    fake.gate.set()
    summary = await run
    assert summary.state == "stopped" and summary.exit_code == 0
    assert summary.progress.counts.done == 4 and summary.progress.counts.written == 4
    assert len(fake.generate_bodies) == 4 and fake.aborts == []
    assert len(rows_of(config.out_dir)) == 4
    assert Manifest.load(config.out_dir).extra.state == "stopped"
    assert not list((config.out_dir / "shards").glob("*.tmp"))


async def test_grace_expiry_aborts_this_runs_requests(
    tmp_path: Path, tokenizer: LoadedTokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    """Each by its own rid: SGLang drops an abort whose rid is not in flight, so the run's
    prefix aborted nothing and the stop waited 10 s to cut the connections."""
    fake = FakeSGLang()
    fake.fault_for = lambda prompt: "hang"
    write_prompts(tmp_path / "prompts.jsonl", 20)
    config = make_config(tmp_path, [fake.url], concurrency=3, stop_grace_s=0.05)
    engine = engine_for(config, fake, tokenizer)
    run = asyncio.ensure_future(engine.run())
    await until_in_flight(fake, 3)
    engine.stop()
    summary = await run
    assert summary.state == "stopped" and summary.progress.counts.interrupted == 3
    assert summary.progress.counts.failed == 0 and summary.exit_code == 0
    rids = [b["rid"] for b in fake.generate_bodies]
    assert sorted(abort["rid"] for abort in fake.aborts) == sorted(rids)
    assert len({rid[:len("cap-12345678-")] for rid in rids}) == 1
    assert "did not answer the abort" not in caplog.text
    assert not (config.out_dir / "failures.jsonl").read_text()


async def test_second_stop_with_abort_skips_the_grace(tmp_path: Path,
                                                      tokenizer: LoadedTokenizer) -> None:
    fake = hanging_after(5)
    write_prompts(tmp_path / "prompts.jsonl", 30)
    config = make_config(tmp_path, [fake.url], concurrency=2, stop_grace_s=3600.0)
    engine = engine_for(config, fake, tokenizer)
    run = asyncio.ensure_future(engine.run())
    await until_in_flight(fake, 2)
    engine.stop()
    await asyncio.sleep(0.01)
    assert not run.done()
    engine.stop(abort=True)
    summary = await run
    assert summary.state == "stopped" and fake.aborts
    assert summary.progress.counts.done == 5 == len(rows_of(config.out_dir))


async def test_pause_holds_new_requests(tmp_path: Path, tokenizer: LoadedTokenizer) -> None:
    fake = FakeSGLang()
    write_prompts(tmp_path / "prompts.jsonl", 6, bad_every=6)
    events: list[CaptureEvent] = []
    config = make_config(tmp_path, [fake.url], concurrency=2)
    engine = engine_for(config, fake, tokenizer, events)
    engine.pause()
    run = asyncio.ensure_future(engine.run())
    while not any(e.kind == "rejected" for e in events):  # the renderer read the whole file
        await asyncio.sleep(0.005)
    for _ in range(20):
        await asyncio.sleep(0)
    assert fake.generate_bodies == [] and engine.progress().state == "paused"
    engine.resume()
    summary = await run
    assert summary.state == "finished" and summary.progress.counts.done == 5


async def test_stop_before_start_sends_nothing(tmp_path: Path,
                                               tokenizer: LoadedTokenizer) -> None:
    fake = FakeSGLang()
    write_prompts(tmp_path / "prompts.jsonl", 10)
    engine = engine_for(make_config(tmp_path, [fake.url]), fake, tokenizer)
    engine.stop()
    summary = await engine.run()
    assert summary.state == "stopped" and fake.generate_bodies == []


async def test_a_full_shard_is_committed_when_its_last_row_is_done(
    tmp_path: Path, tokenizer: LoadedTokenizer
) -> None:
    """Shards smaller than the writer thread's hand-off batch (64 rows) are committed as
    they fill, not after 64 rows or two minutes: a run killed now keeps them."""
    fake = hanging_after(7)
    write_prompts(tmp_path / "prompts.jsonl", 40)
    config = make_config(tmp_path, [fake.url], concurrency=2, shard_rows=5)
    engine = engine_for(config, fake, tokenizer)
    run = asyncio.ensure_future(engine.run())
    await async_wait_until(lambda: committed_rows(config.out_dir) >= 5, 30,
                           "a shard of 5 rows committed while the run goes on")
    assert not run.done() and len(rows_of(config.out_dir)) == 5
    engine.stop(abort=True)
    summary = await run
    assert summary.progress.counts.done == 7 == len(rows_of(config.out_dir))

"""Each fault kind handled as it requires: retried or not, charged or not, the server paused,
refused or left alone, and all of it visible in the summary."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from test_engine_fakes import (
    FakeSGLang,
    bundled_tokenizer,
    capture,
    make_config,
    rows_of,
    write_prompts,
)

from eagle_tui.core.capture.engine import CaptureEngine
from eagle_tui.core.tokenizer import LoadedTokenizer


@pytest.fixture
def tokenizer() -> LoadedTokenizer:
    return bundled_tokenizer()


def failures_of(out_dir: Path) -> list[dict[str, Any]]:
    text = (out_dir / "failures.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize(
    ("fault", "kind"),
    [("503", "busy"), ("500", "server_error"), ("reset", "connection_lost"),
     ("garbage", "bad_response"), ("abort", "aborted")],
)
async def test_transient_fault_is_retried(tmp_path: Path, tokenizer: LoadedTokenizer,
                                          fault: str, kind: str) -> None:
    fake = FakeSGLang()
    fake.faults.extend([fault, fault])
    write_prompts(tmp_path / "prompts.jsonl", 3)
    config = make_config(tmp_path, [fake.url], concurrency=1)
    summary = await capture(config, [fake], tokenizer)
    assert summary.progress.counts.done == 3 and summary.exit_code == 0
    assert summary.progress.errors == {kind: 2}
    assert len(fake.generate_bodies) == 5
    assert len({b["rid"] for b in fake.generate_bodies}) == 5  # a fresh rid per attempt


@pytest.mark.parametrize("fault", ["500", "garbage", "reset"])
async def test_budget_exhausted_fails_the_row(tmp_path: Path, tokenizer: LoadedTokenizer,
                                              fault: str) -> None:
    fake = FakeSGLang()
    fake.faults.extend([fault] * 3)
    write_prompts(tmp_path / "prompts.jsonl", 2)
    config = make_config(tmp_path, [fake.url], concurrency=1)
    summary = await capture(config, [fake], tokenizer)
    assert summary.progress.counts.failed == 1 and summary.progress.counts.done == 1
    assert summary.exit_code == 1
    [failure] = failures_of(config.out_dir)
    assert failure["sample_id"] == "p00000" and failure["attempts"] == 3
    assert "gave up after 3 attempts" in failure["reason"]
    assert failure["line"] == 1 and failure["endpoint"] == fake.url


async def test_context_too_long_is_permanent(tmp_path: Path,
                                             tokenizer: LoadedTokenizer) -> None:
    fake = FakeSGLang()
    fake.faults.append("ctx")
    write_prompts(tmp_path / "prompts.jsonl", 2)
    config = make_config(tmp_path, [fake.url], concurrency=1)
    summary = await capture(config, [fake], tokenizer)
    assert len(fake.generate_bodies) == 2
    assert summary.progress.failures == {"context_too_long": 1}
    [failure] = failures_of(config.out_dir)
    assert failure["attempts"] == 1 and "context length" in failure["reason"]


async def test_timeout_aborts_on_server_and_retries(tmp_path: Path,
                                                    tokenizer: LoadedTokenizer) -> None:
    fake = FakeSGLang()
    fake.faults.append("hang")
    write_prompts(tmp_path / "prompts.jsonl", 2)
    config = make_config(tmp_path, [fake.url], concurrency=1, request_timeout_s=0.2)
    summary = await capture(config, [fake], tokenizer)
    assert summary.progress.counts.done == 2 and summary.progress.errors == {"timeout": 1}
    hung_rid = fake.generate_bodies[0]["rid"]
    assert {"rid": hung_rid} in fake.aborts


async def test_unauthorized_server_is_refused_others_carry_on(
    tmp_path: Path, tokenizer: LoadedTokenizer
) -> None:
    good, locked = FakeSGLang("http://good:1"), FakeSGLang("http://locked:2")
    good.gate = asyncio.Event()  # hold the good server until the locked one was tried

    def refuse(prompt: list[int]) -> str:
        assert good.gate is not None
        good.gate.set()
        return "401"

    locked.fault_for = refuse
    write_prompts(tmp_path / "prompts.jsonl", 10)
    config = make_config(tmp_path, [good.url, locked.url])
    summary = await capture(config, [good, locked], tokenizer)
    assert summary.progress.counts.done == 10 and summary.exit_code == 0
    states = {s.url: s.state for s in summary.progress.servers}
    assert states == {good.url: "ready", locked.url: "refused"}


async def test_no_server_left_fails_the_run_not_the_rows(
    tmp_path: Path, tokenizer: LoadedTokenizer
) -> None:
    locked = FakeSGLang()
    locked.fault_for = lambda prompt: "401"
    write_prompts(tmp_path / "prompts.jsonl", 10)
    config = make_config(tmp_path, [locked.url])
    summary = await capture(config, [locked], tokenizer)
    assert summary.state == "failed" and summary.exit_code == 3
    assert summary.reason is not None and "API key" in summary.reason
    assert summary.progress.counts.failed == 0
    assert failures_of(config.out_dir) == []


async def test_unreachable_server_is_paused_and_costs_nothing(
    tmp_path: Path, tokenizer: LoadedTokenizer
) -> None:
    fake = FakeSGLang()
    fake.faults.extend(["refused"] * 4)  # more than the retry budget
    write_prompts(tmp_path / "prompts.jsonl", 3)
    config = make_config(tmp_path, [fake.url], concurrency=1)
    summary = await capture(config, [fake], tokenizer)
    assert summary.progress.counts.done == 3 and summary.progress.counts.failed == 0
    assert summary.progress.errors == {"unreachable": 4}
    assert fake.health_checks >= 5  # paused after each refusal, re-admitted by /health


async def test_server_down_too_long_fails_the_run(tmp_path: Path,
                                                  tokenizer: LoadedTokenizer) -> None:
    fake = FakeSGLang()
    fake.healthy = False
    write_prompts(tmp_path / "prompts.jsonl", 3)
    config = make_config(tmp_path, [fake.url], server_down_limit_s=0.3)
    summary = await capture(config, [fake], tokenizer)
    assert summary.state == "failed" and "no server has been healthy" in str(summary.reason)
    assert fake.generate_bodies == [] and summary.progress.counts.failed == 0


async def test_retry_goes_to_the_other_server(tmp_path: Path,
                                              tokenizer: LoadedTokenizer) -> None:
    a, b = FakeSGLang("http://a:1"), FakeSGLang("http://b:2")
    a.fault_for = lambda prompt: "reset"
    a.healthy = True
    write_prompts(tmp_path / "prompts.jsonl", 20)
    config = make_config(tmp_path, [a.url, b.url], health_retry_s=30.0)
    summary = await capture(config, [a, b], tokenizer)
    assert summary.progress.counts.done == 20 and summary.progress.counts.failed == 0
    assert {r["endpoint"] for r in rows_of(config.out_dir)} == {b.url}


async def test_in_flight_bounded_per_server(tmp_path: Path,
                                            tokenizer: LoadedTokenizer) -> None:
    a, b = FakeSGLang("http://a:1"), FakeSGLang("http://b:2")
    gate = asyncio.Event()
    a.gate = b.gate = gate
    write_prompts(tmp_path / "prompts.jsonl", 40)
    config = make_config(tmp_path, [a.url, b.url], concurrency=3)
    by_url = {a.url: a, b.url: b}
    engine = CaptureEngine(config, tokenizer=tokenizer,
                           client_factory=lambda url: by_url[url.public].client())
    run = asyncio.ensure_future(engine.run())
    while a.in_flight + b.in_flight < 6:
        await asyncio.sleep(0.005)
    progress = engine.progress()
    assert progress.counts.in_flight == 6
    assert [s.in_flight for s in progress.servers] == [3, 3]
    gate.set()
    summary = await run
    assert summary.progress.counts.done == 40
    assert a.max_in_flight == 3 and b.max_in_flight == 3


async def test_disk_full_stops_the_run_and_keeps_complete_shards(
    tmp_path: Path, tokenizer: LoadedTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from eagle_tui.core.shards import writer as writer_module

    original = writer_module._OpenShard.write_group
    calls = 0

    def fill_up(self: writer_module._OpenShard, rows: list[Any]) -> None:
        nonlocal calls
        calls += 1
        if calls > 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        original(self, rows)

    monkeypatch.setattr(writer_module._OpenShard, "write_group", fill_up)
    fake = FakeSGLang()
    write_prompts(tmp_path / "prompts.jsonl", 400)
    config = make_config(tmp_path, [fake.url], shard_rows=64, concurrency=2)
    summary = await capture(config, [fake], tokenizer)
    assert summary.state == "failed" and summary.exit_code == 3
    assert summary.reason is not None and "disk full" in summary.reason
    assert len(rows_of(config.out_dir)) == summary.progress.counts.written == 128
    assert failures_of(config.out_dir) == []  # lost rows are not failures: resume redoes them
    assert not list((config.out_dir / "shards").glob("*.tmp"))

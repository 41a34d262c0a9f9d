"""A stop that lands while the last rows are in flight, which then finish within the drain,
stopped nothing: the batch is finished (issue 39 item 6), in its summary, its manifest and
its exit status; a stop that leaves rows for a resume is still ``stopped``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support.waiting import async_wait_until
from test_engine_fakes import FakeSGLang, bundled_tokenizer, make_config, rows_of, write_prompts

from eagle_tui.core.capture.engine import CaptureEngine, CaptureSummary
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.tokenizer import LoadedTokenizer


@pytest.fixture
def tokenizer() -> LoadedTokenizer:
    return bundled_tokenizer()


async def stop_with_in_flight(tmp_path: Path, tokenizer: LoadedTokenizer, prompts: int,
                              concurrency: int) -> tuple[CaptureSummary, Path]:
    """Run a batch until ``concurrency`` requests wait at the gate, stop it, then let them
    answer; its summary and the batch directory."""
    fake = FakeSGLang()
    fake.gate = asyncio.Event()
    write_prompts(tmp_path / "prompts.jsonl", prompts)
    config = make_config(tmp_path, [fake.url], concurrency=concurrency, stop_grace_s=60.0)
    engine = CaptureEngine(config, tokenizer=tokenizer,
                           client_factory=lambda url: fake.client())
    run = asyncio.ensure_future(engine.run())
    await async_wait_until(lambda: fake.in_flight >= min(prompts, concurrency)
                           and engine.progress().counts.total is not None, 30,
                           "requests in flight, prompts counted", every=0.005)
    engine.stop()
    await asyncio.sleep(0)
    fake.gate.set()
    return await run, config.out_dir


async def test_a_stop_during_the_last_rows_leaves_a_finished_batch(
        tmp_path: Path, tokenizer: LoadedTokenizer) -> None:
    summary, out_dir = await stop_with_in_flight(tmp_path, tokenizer, prompts=4,
                                                   concurrency=4)
    assert summary.state == "finished" and summary.exit_code == 0
    counts = summary.progress.counts
    assert counts.done == 4 and counts.remaining == 0 and counts.interrupted == 0
    assert Manifest.load(out_dir).extra.state == "finished"
    assert len(rows_of(out_dir)) == 4


async def test_a_stop_that_leaves_rows_is_still_stopped(
        tmp_path: Path, tokenizer: LoadedTokenizer) -> None:
    summary, out_dir = await stop_with_in_flight(tmp_path, tokenizer, prompts=20,
                                                   concurrency=4)
    assert summary.state == "stopped"
    assert summary.progress.counts.remaining == 16
    assert Manifest.load(out_dir).extra.state == "stopped"

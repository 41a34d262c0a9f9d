"""End to end against simulated servers that misbehave: a server that crashes mid-batch and
comes back on the same port, and a mix of every fault kind, each handled as it requires."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from support.waiting import async_wait_until
from test_engine_fakes import bundled_tokenizer, make_config, rows_of, write_prompts

from eagle_tui.core.capture.config import RetryPolicy
from eagle_tui.core.capture.engine import CaptureEngine
from eagle_tui.core.capture.report import summary_text
from eagle_tui.core.sim.launcher import SimProcess

pytestmark = pytest.mark.slow

FAST = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0")


async def test_server_crash_and_restart_loses_nothing(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", 400)
    crashing = SimProcess([*FAST, "--crash-after-requests", "120"])
    port = crashing.port
    restarted: list[SimProcess] = []

    async def restart_after_crash() -> None:
        await crashing.wait_exit_async(timeout=120)
        again = SimProcess(FAST, port=port).start()
        restarted.append(again)
        await again.wait_ready_async(timeout=60)

    config = make_config(tmp_path, [crashing.url], concurrency=16, max_new_tokens=32,
                         retry=RetryPolicy(max_attempts=3, base_delay_s=0.05, max_delay_s=0.2),
                         health_retry_s=0.1)
    try:
        with crashing:
            crashing.wait_ready(60)
            watcher = asyncio.ensure_future(restart_after_crash())
            summary = await CaptureEngine(config, tokenizer=bundled_tokenizer()).run()
            await watcher
    finally:
        for sim in restarted:
            sim.close()
    assert crashing.returncode is not None and restarted  # it really crashed
    assert summary.state == "finished" and summary.exit_code == 0, summary_text(summary)
    assert summary.progress.counts.done == 400 and summary.progress.counts.failed == 0
    assert {"connection_lost", "unreachable"} & set(summary.progress.errors)
    ids = [r["sample_id"] for r in rows_of(config.out_dir)]
    assert sorted(ids) == [f"p{i:05d}" for i in range(400)]


def long_prompt_file(path: Path, normal: int, long: int) -> None:
    write_prompts(path, normal)
    essay = " ".join(f"word{i}" for i in range(900))
    with path.open("a") as handle:
        for i in range(long):
            record = {"id": f"long{i}", "messages": [{"role": "user", "content": essay}]}
            handle.write(json.dumps(record) + "\n")


async def test_every_fault_kind_handled_and_reported(tmp_path: Path) -> None:
    long_prompt_file(tmp_path / "prompts.jsonl", 240, 4)
    faulty = SimProcess([*FAST, "--error-rate", "0.06", "--reset-rate", "0.05",
                         "--garbage-rate", "0.05", "--fault-seed", "5",
                         "--context-length", "800"])
    slow = SimProcess([*FAST, "--tokens-per-s", "60", "--context-length", "800"])
    glacial = SimProcess([*FAST, "--tokens-per-s", "4", "--context-length", "800"])
    with faulty, slow, glacial:
        for sim in (faulty, slow, glacial):
            sim.wait_ready(60)
        config = make_config(
            tmp_path, [faulty.url, slow.url, glacial.url], concurrency=4, max_new_tokens=24,
            request_timeout_s=1.5, retry=RetryPolicy(max_attempts=20, base_delay_s=0.0,
                                                     max_delay_s=0.0))  # 20: a loaded CI
        # machine can time a few rows out on the glacial server many times in a row
        engine = CaptureEngine(config, tokenizer=bundled_tokenizer())
        run = asyncio.ensure_future(engine.run())
        await abort_slow_requests_once(engine, slow.url, run)
        summary = await run
    p = summary.progress
    assert p.counts.done == 240 and p.counts.failed == 4, summary_text(summary)
    assert dict(p.failures) == {"context_too_long": 4}
    for kind in ("busy", "connection_lost", "bad_response", "timeout", "aborted"):
        assert p.errors.get(kind, 0) > 0, (kind, dict(p.errors))
    assert p.errors.get("server_error", 0) + p.errors.get("busy", 0) > 0
    failures = [json.loads(x) for x in
                (config.out_dir / "failures.jsonl").read_text().splitlines()]
    assert sorted(f["sample_id"] for f in failures) == [f"long{i}" for i in range(4)]
    assert all(f["attempts"] == 1 and "context length" in f["reason"] for f in failures)
    text = summary_text(summary)
    assert "context_too_long 4" in text and "timeout" in text and "aborted" in text
    assert len(rows_of(config.out_dir)) == 240


async def abort_slow_requests_once(engine: CaptureEngine, url: str,
                                   run: asyncio.Future[object]) -> None:
    """An operator's ``/abort_request`` on one server while our requests run there."""
    def two_in_flight() -> bool:
        servers = {s.url: s for s in engine.progress().servers}
        return url in servers and servers[url].in_flight >= 2

    # Once the capture has ended nothing will be in flight again: fail saying so (this loop
    # used to spin forever then, a hang instead of a failure).
    await async_wait_until(two_in_flight, 300, f"2 requests in flight on {url}",
                           unless=lambda: "the capture ended first" if run.done() else None)
    async with httpx.AsyncClient() as client:
        await client.post(f"{url}/abort_request", json={"abort_all": True})

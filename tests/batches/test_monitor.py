"""``BatchMonitor`` with no screen at all (``core.batches.monitor``, what the Capture and
Streams views read): it lists a detached batch from the registry, hands over the events of
the requests it was asked to watch, and pauses, resumes and stops the batch through its kept
connection, on its own loop while the caller's loop (this test's) only reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from batch_helpers import batch_config, write_prompts
from support.waiting import async_wait_until

from eagle_tui.core.batches.detach import launch_detached
from eagle_tui.core.batches.monitor import BatchMonitor
from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.batchstate import FINAL_STATES, BatchState
from eagle_tui.core.capture.events import CaptureEvent, RequestEvent

pytestmark = pytest.mark.slow


async def test_the_monitor_follows_a_detached_batch_with_no_ui(
    tmp_path: Path, registry: Registry, start_sim: Any
) -> None:
    sim = start_sim("--tokens-per-s", "50")  # ~0.6 s per request: slow enough to act on
    write_prompts(tmp_path / "prompts.jsonl", 60)
    config = batch_config(tmp_path, sim.url, max_new_tokens=32, concurrency=4)
    record = launch_detached(config).record
    monitor = BatchMonitor(registry, poll_s=0.1)

    def state() -> BatchState | None:
        found = [r.view.state for r in monitor.readings() if r.batch_id == record.id]
        return found[0] if found else None

    events: list[CaptureEvent] = []

    def a_watched_request_finished() -> bool:
        events.extend(monitor.take_events(record.id))
        return any(isinstance(e, RequestEvent) and e.kind == "finished" and e.watched
                   for e in events)

    try:
        await async_wait_until(lambda: state() == BatchState.RUNNING, 60, "running")
        monitor.watch(record.id, 2)
        await async_wait_until(a_watched_request_finished, 60, "a watched request's end")
        monitor.pause(record.id)
        await async_wait_until(lambda: state() == BatchState.PAUSED, 30, "paused")
        monitor.resume(record.id)
        await async_wait_until(lambda: state() == BatchState.RUNNING, 30, "running again")
        monitor.stop(record.id, abort=True)
        await async_wait_until(lambda: state() in FINAL_STATES, 60, "stopped")
        assert not any(r.error for r in monitor.readings())
    finally:
        monitor.close()

"""Helpers of the batch tests (no tests here): prompts, configs, waiting on workers and
events without sleeping, a fake engine for in-process control servers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from support import waiting

from eagle_tui.core.batches.api import BatchInfo, Hello, ProgressEvent
from eagle_tui.core.batches.control_app import ControlApi
from eagle_tui.core.batches.control_server import ControlServer
from eagle_tui.core.batches.events import BatchEvent
from eagle_tui.core.batches.hub import EventHub
from eagle_tui.core.batches.status import RecentErrors, StatusBuilder, WatchTally
from eagle_tui.core.batchstate import BatchState, public_state
from eagle_tui.core.capture.config import CaptureConfig, RetryPolicy
from eagle_tui.core.capture.progress import CaptureProgress, Progress, ProgressTracker
from eagle_tui.core.clock import SystemClock
from eagle_tui.core.shards.batchdir.layout import BatchDir
from eagle_tui.core.tokenizer import bundled_tokenizer_path
from eagle_tui.core.urls import ServerURL

TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "look a word up",
    "parameters": {"type": "object", "properties": {"word": {"type": "string"}},
                   "required": ["word"]}}}]


def write_prompts(path: Path, count: int, *, tools_every: int = 0) -> list[str]:
    """``count`` chat records with ids ``q00000``...; every ``tools_every``-th declares a tool."""
    lines, ids = [], []
    for i in range(count):
        record: dict[str, Any] = {"id": f"q{i:05d}", "messages": [
            {"role": "user", "content": f"question number {i}: what is {i} squared?"}]}
        if tools_every and i % tools_every == 0:
            record["tools"] = TOOLS
        lines.append(json.dumps(record))
        ids.append(record["id"])
    path.write_text("\n".join(lines) + "\n")
    return ids


def batch_config(tmp_path: Path, server: str, **overrides: Any) -> CaptureConfig:
    """A small, quick batch against ``server``."""
    settings: dict[str, Any] = {
        "prompts": tmp_path / "prompts.jsonl",
        "out_dir": tmp_path / "out",
        "servers": (ServerURL.parse(server),),
        "tokenizer": bundled_tokenizer_path(),
        "max_new_tokens": 64,
        "concurrency": 4,
        "retry": RetryPolicy(max_attempts=3, base_delay_s=0.0, max_delay_s=0.0),
        "health_interval_s": 30.0,
        "health_retry_s": 0.05,
        "shard_rows": 8,
        "stop_grace_s": 60.0,
    }
    settings.update(overrides)
    return CaptureConfig(**settings)


def wait_lock_free(out_dir: Path, timeout: float = 30.0) -> bool:
    """Block until no process holds ``out_dir``'s lock (its worker is gone); False on timeout."""
    return waiting.wait_lock_free(BatchDir(out_dir).lock, timeout)


class EventLog:
    """Reads a client's event stream, keeping everything seen, and waits on predicates."""

    def __init__(self, events: AsyncIterator[BatchEvent]) -> None:
        self._events = events
        self.seen: list[BatchEvent] = []

    async def next(self, timeout: float = 60.0) -> BatchEvent:
        async with asyncio.timeout(timeout):
            event = await anext(self._events)
        self.seen.append(event)
        return event

    async def until(self, predicate: Callable[[BatchEvent], bool],
                    timeout: float = 60.0) -> BatchEvent:
        """The first event (from now) that ``predicate`` accepts."""
        async with asyncio.timeout(timeout):
            async for event in self._events:
                self.seen.append(event)
                if predicate(event):
                    return event
        raise AssertionError(f"the event stream ended first; last events: {self.seen[-5:]}")

    def of(self, event_type: str, **match: Any) -> list[BatchEvent]:
        return [e for e in self.seen if e.type == event_type
                and all(getattr(e.data, k, None) == v for k, v in match.items())]


def progress_where(check: Callable[[Progress], bool]) -> Callable[[BatchEvent], bool]:
    """A predicate on ``progress`` events' counters."""
    return lambda e: isinstance(e.data, ProgressEvent) and check(e.data.progress)


class FakeEngine:
    """The engine's control surface, recording calls (for in-process servers)."""

    def __init__(self) -> None:
        self.tracker = ProgressTracker(SystemClock())
        self.tracker.state = BatchState.RUNNING
        self.calls: list[tuple[Any, ...]] = []

    def progress(self) -> CaptureProgress:
        return self.tracker.snapshot()

    def pause(self) -> None:
        self.calls.append(("pause",))
        self.tracker.state = BatchState.PAUSED

    def resume(self) -> None:
        self.calls.append(("resume",))
        self.tracker.state = BatchState.RUNNING

    def watch(self, count: int) -> None:
        self.calls.append(("watch", count))

    def stop(self, grace_s: float | None = None, *, abort: bool = False) -> None:
        self.calls.append(("stop", grace_s, abort))
        self.tracker.state = BatchState.STOPPING


async def serve_fake(out_dir: Path, *, allowed_uid: int | None = None,
                     max_queued: int = 64) -> tuple[ControlServer, FakeEngine, EventHub]:
    """A real control server on ``out_dir/control.sock`` around a FakeEngine."""
    out_dir.mkdir(parents=True, exist_ok=True)
    engine, hub, watch = FakeEngine(), EventHub(max_queued=max_queued), WatchTally()
    batch = BatchInfo(id="test-batch", name="test", out_dir=str(out_dir))
    status = StatusBuilder(batch, engine.progress, hub, RecentErrors(), watch, out_dir)

    def hello() -> Hello:
        p = engine.progress()
        return Hello(batch=batch, state=public_state(p.state), progress=p.counts,
                     servers=p.servers)

    api = ControlApi(engine, status, hub, watch, hello)
    server = ControlServer(api, engine, hub, out_dir / "control.sock", allowed_uid=allowed_uid)
    await server.start()
    return server, engine, hub


async def raw_exchange(socket_path: Path, data: bytes, timeout: float = 10.0) -> bytes:
    """Send raw bytes to a Unix socket and read until the other side closes."""
    reader, writer = await asyncio.open_unix_connection(str(socket_path))
    try:
        writer.write(data)
        await writer.drain()
        async with asyncio.timeout(timeout):
            return await reader.read(65536)
    finally:
        writer.close()
        await writer.wait_closed()

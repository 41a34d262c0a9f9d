"""Capture batches as the Capture and Streams views see them, behind one small interface.

``CaptureControl`` is all the views use: list batch snapshots, start a batch from a
``BatchRequest``, pause / resume / stop one, ask it to stream the next N requests, and take
the token events of the watched ones. ``InProcessCapture`` implements it by running each
``core.capture.CaptureEngine`` on its own thread and event loop (so a batch at full speed
never stalls the UI loop). Issue #5's detached workers will implement the same interface
over their control socket; the views will not change.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from core.capture.config import CaptureConfig, SamplingPreset
from core.capture.engine import CaptureEngine
from core.capture.events import CaptureEvent, EventSink
from core.capture.progress import CaptureProgress
from core.clock import SystemClock
from core.errors import ConfigError
from tui.sources.tokenizers import load_private

log = logging.getLogger(__name__)

SNAPSHOT_S = 0.25
EVENT_BUFFER = 50_000
PRESETS: dict[str, SamplingPreset] = {
    "greedy": SamplingPreset("", temperature=0.0),
    "default": SamplingPreset("", temperature=1.0),
    "kimi": SamplingPreset("", temperature=1.0, top_p=0.95),
}
LIVE_STATES = frozenset({"starting", "running", "paused", "stopping"})


@dataclass(frozen=True)
class BatchRequest:
    """What the new-batch form asks for."""

    prompts: Path
    out_dir: Path
    servers: tuple[str, ...]
    tokenizer: Path
    preset: str = "greedy"
    concurrency: int = 8
    max_new_tokens: int = 4096
    resume: bool = False
    shard_rows: int = 2000
    shard_max_age_s: float = 120.0

    def to_config(self) -> CaptureConfig:
        """The engine's config (ConfigError when a field is unusable)."""
        if self.preset not in PRESETS:
            raise ConfigError(f"unknown sampling preset {self.preset!r}; use {', '.join(PRESETS)}")
        return CaptureConfig(
            prompts=self.prompts,
            out_dir=self.out_dir,
            servers=self.servers,
            tokenizer=self.tokenizer,
            presets=(PRESETS[self.preset],),
            concurrency=self.concurrency,
            max_new_tokens=self.max_new_tokens,
            resume=self.resume,
            shard_rows=self.shard_rows,
            shard_max_age_s=self.shard_max_age_s,
        )


@dataclass(frozen=True)
class BatchSnapshot:
    """One batch at one moment. ``progress`` is None until the engine has started."""

    batch_id: str
    out_dir: Path
    prompts: Path
    servers: tuple[str, ...]
    state: str
    tokenizer: Path | None = None
    progress: CaptureProgress | None = None
    error: str | None = None

    @property
    def live(self) -> bool:
        """True while the batch may still send requests."""
        return self.state in LIVE_STATES


class CaptureControl(Protocol):
    """What the views need from capture (in-process now, detached workers later)."""

    def batches(self) -> tuple[BatchSnapshot, ...]:
        """Every known batch, newest last (non-blocking)."""
        ...

    def start(self, request: BatchRequest) -> str:
        """Start a batch; its id. ConfigError when the request is unusable."""
        ...

    def pause(self, batch_id: str) -> None:
        """Send no new requests (in-flight ones finish)."""
        ...

    def resume(self, batch_id: str) -> None:
        """Undo ``pause``."""
        ...

    def stop(self, batch_id: str, *, abort: bool) -> None:
        """Stop: drain in-flight requests (``abort`` False) or abort them."""
        ...

    def watch(self, batch_id: str, count: int) -> None:
        """Stream the next ``count`` requests of the batch (token deltas as events)."""
        ...

    def take_events(self, batch_id: str, limit: int = 10_000) -> list[CaptureEvent]:
        """Events of watched requests since the last call (oldest first)."""
        ...

    def close(self) -> None:
        """Stop every live batch (abort) and release threads."""
        ...


def validate_request(request: BatchRequest) -> CaptureConfig:
    """Check a request before starting it (cheap checks only); ConfigError says what to fix."""
    from core.capture.prompts import open_prompts

    config = request.to_config()
    open_prompts(config.prompts)
    if not config.tokenizer.is_dir():
        raise ConfigError(f"tokenizer directory {config.tokenizer} does not exist")
    if (config.out_dir / "manifest.json").exists() and not config.resume:
        raise ConfigError(f"{config.out_dir} already holds a batch; tick resume or pick another")
    return config


EngineFactory = Callable[[CaptureConfig, EventSink], CaptureEngine]


def default_engine(config: CaptureConfig, sink: EventSink) -> CaptureEngine:
    """A real engine on the system clock, with its own tokenizer instance (loaded under the
    process-wide load lock, so it never races the views' tokenizer loads)."""
    tokenizer = load_private(config.tokenizer, trust_remote_code=config.trust_remote_code)
    return CaptureEngine(config, clock=SystemClock(), event_sink=sink, tokenizer=tokenizer)


class WatchedEvents:
    """Keeps the events of watched requests (called on the engine's loop: cheap)."""

    def __init__(self) -> None:
        self.events: deque[CaptureEvent] = deque(maxlen=EVENT_BUFFER)
        self._watched: set[str] = set()

    def __call__(self, event: CaptureEvent) -> None:
        if event.watched:
            self._watched.add(event.sample_id)
        if event.sample_id in self._watched:
            self.events.append(event)
            if event.kind in ("finished", "failed"):
                self._watched.discard(event.sample_id)


@dataclass
class _Run:
    """A batch running in-process: its engine, thread, latest snapshot and watched events."""

    snapshot: BatchSnapshot
    config: CaptureConfig
    watched: WatchedEvents
    engine: CaptureEngine | None = None
    loop: asyncio.AbstractEventLoop | None = None
    thread: threading.Thread | None = None
    pending: list[Callable[[CaptureEngine], None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class InProcessCapture:
    """``CaptureControl`` over engines running in this process, one thread each."""

    def __init__(self, engine_factory: EngineFactory = default_engine) -> None:
        self._runs: dict[str, _Run] = {}
        self._ids = itertools.count(1)
        self._factory = engine_factory

    def batches(self) -> tuple[BatchSnapshot, ...]:
        return tuple(run.snapshot for run in self._runs.values())

    def start(self, request: BatchRequest) -> str:
        config = validate_request(request)
        batch_id = f"b{next(self._ids)}-{config.out_dir.name}"
        snapshot = BatchSnapshot(
            batch_id,
            config.out_dir,
            config.prompts,
            config.servers,
            "starting",
            tokenizer=config.tokenizer,
        )
        run = _Run(snapshot, config, WatchedEvents())
        run.thread = threading.Thread(target=self._thread, args=(run,), name=batch_id, daemon=True)
        self._runs[batch_id] = run
        run.thread.start()
        return batch_id

    def pause(self, batch_id: str) -> None:
        self._call(batch_id, lambda engine: engine.pause())

    def resume(self, batch_id: str) -> None:
        self._call(batch_id, lambda engine: engine.resume())

    def stop(self, batch_id: str, *, abort: bool) -> None:
        self._call(batch_id, lambda engine: engine.stop(abort=abort))

    def watch(self, batch_id: str, count: int) -> None:
        self._call(batch_id, lambda engine: engine.watch(count))

    def take_events(self, batch_id: str, limit: int = 10_000) -> list[CaptureEvent]:
        run = self._runs.get(batch_id)
        if run is None:
            return []
        taken: list[CaptureEvent] = []
        with contextlib.suppress(IndexError):
            while len(taken) < limit:
                taken.append(run.watched.events.popleft())
        return taken

    def close(self) -> None:
        for batch_id, run in self._runs.items():
            if run.snapshot.live:
                self.stop(batch_id, abort=True)
        for run in self._runs.values():
            if run.thread is not None:
                run.thread.join(timeout=15.0)

    # -- internals -------------------------------------------------------------------------

    def _call(self, batch_id: str, action: Callable[[CaptureEngine], None]) -> None:
        """Run ``action`` on the batch's loop (queued until the loop exists)."""
        run = self._runs.get(batch_id)
        if run is None:
            return
        with run.lock:
            if run.loop is None:
                run.pending.append(action)
                return
        engine = run.engine
        assert engine is not None  # set before the loop is published
        with contextlib.suppress(RuntimeError):  # the loop closed in between
            run.loop.call_soon_threadsafe(action, engine)

    def _thread(self, run: _Run) -> None:
        try:
            asyncio.run(self._drive(run))
        except Exception as exc:  # ConfigError, TokenizerError, bugs: the batch failed
            log.exception("batch %s failed", run.snapshot.batch_id)
            run.snapshot = replace(run.snapshot, state="failed", error=str(exc))

    async def _drive(self, run: _Run) -> None:
        engine = await asyncio.to_thread(self._factory, run.config, run.watched)
        with run.lock:
            run.engine = engine
            run.loop = asyncio.get_running_loop()
            for action in run.pending:
                run.loop.call_soon(action, engine)
            run.pending.clear()
        publisher = asyncio.create_task(self._publish(engine, run))
        try:
            summary = await engine.run()
        finally:
            publisher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await publisher
        run.snapshot = replace(
            run.snapshot, state=summary.state, progress=summary.progress, error=summary.reason
        )

    async def _publish(self, engine: CaptureEngine, run: _Run) -> None:
        while True:
            progress = engine.progress()
            run.snapshot = replace(run.snapshot, state=progress.state, progress=progress)
            await asyncio.sleep(SNAPSHOT_S)

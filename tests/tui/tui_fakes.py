"""Fakes for the TUI's sources: a server feed that replays snapshots, a capture control
that records calls, snapshot builders, a spy on the app's toasts; ``wait_for(pilot, condition)`` is
``support.waiting.pilot_wait``, here too because every view test imports its fakes from here."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from support.progress import snapshot as progress_snapshot
from support.waiting import pilot_wait as wait_for  # noqa: F401  (the views' tests use it)

from eagle_tui.core.capture.dispatch import ServerStatus
from eagle_tui.core.capture.events import CaptureEvent
from eagle_tui.core.capture.progress import CaptureProgress
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.poller import HealthOutcome, HealthProbe
from eagle_tui.core.health.snapshot import (
    Expectation,
    Flag,
    HealthSnapshot,
    ServingLoad,
    StartupProgress,
)
from eagle_tui.core.proc.report import GpuReport, PortStatus, ProcessReport
from eagle_tui.core.shards.schema import ShardRow
from eagle_tui.tui.options import ServerTarget
from eagle_tui.tui.render.batch import BatchSnapshot
from eagle_tui.tui.sources.capture import BatchRequest
from eagle_tui.tui.sources.server import Emit, ServerAction

if TYPE_CHECKING:
    from textual.app import App
    from textual.notifications import SeverityLevel

    from eagle_tui.tui.sources.server import FeedItem

def health(
    phase: Phase = Phase.LOADING_WEIGHTS,
    *,
    phase_s: float = 42.0,
    elapsed_s: float | None = 65.0,
    window_s: float = 120.0,
    flags: Sequence[Flag] = (),
    last_log_line: str | None = "Loading safetensors checkpoint shards:  45% Completed | 29/64",
    seq: int = 1,
    latency_s: float | None = None,
    **extra: object,
) -> HealthSnapshot:
    """A plausible snapshot with every field filled, fixed values (no clock involved)."""
    probe = (
        HealthProbe(HealthOutcome.OK, 200, latency_s, "200", 1000.0, seq)
        if latency_s is not None
        else HealthProbe(HealthOutcome.REFUSED, None, None, "connection refused", 1000.0, seq)
    )
    snapshot = HealthSnapshot(
        at=1_800_000_000.0,
        phase=phase,
        phase_s=phase_s,
        elapsed_s=elapsed_s,
        expected=Expectation(
            window_s,
            "history",
            starts_recorded=3,
            typical_phase_s=((Phase.LAUNCHING, 9.0), (Phase.LOADING_WEIGHTS, 50.0)),
        ),
        window_fraction=(elapsed_s / window_s) if elapsed_s else None,
        flags=tuple(flags),
        last_log_line=last_log_line,
        last_log_age_s=1.0,
        progress=StartupProgress(shards_done=29, shards_total=64, shards_percent=45),
        phase_durations=((Phase.LAUNCHING, 8.0), (Phase.LOADING_WEIGHTS, phase_s)),
        process=ProcessReport(pid=4242, alive=True, status="running", cpu_percent=97.0),
        port=PortStatus(port=30000, bound=False),
        health=probe,
        gpu=GpuReport(available=False, reason="no GPU information"),
    )
    return replace(snapshot, **extra)  # type: ignore[arg-type]


def ready_health(seq: int = 9, latency_s: float = 0.012) -> HealthSnapshot:
    """A ready, serving server."""
    return health(
        Phase.READY,
        phase_s=30.0,
        elapsed_s=100.0,
        seq=seq,
        latency_s=latency_s,
        load=ServingLoad(
            "decode", running=12, queued=3, throughput=1520.0, token_usage=0.31, age_s=1.0
        ),
        port=PortStatus(port=30000, bound=True, holder_pid=4242, held_by_server=True),
        last_log_line="Decode batch, #running-req: 12, gen throughput (token/s): 1520",
    )


class FakeServerFeed:
    """Emits ``items`` then whatever the test ``push``es; records control requests."""

    def __init__(
        self, target: ServerTarget, items: Sequence[FeedItem] = (), *, managed: bool = False
    ) -> None:
        self.target = target
        self.items = list(items)
        self.can_control = managed
        self.requests: list[ServerAction] = []
        self._queue: queue.Queue[FeedItem] = queue.Queue()
        self.running = threading.Event()

    def push(self, item: FeedItem) -> None:
        """Emit ``item`` from the feed's thread."""
        self._queue.put(item)

    def run(self, stop: threading.Event, emit: Emit) -> None:
        for item in self.items:
            emit(item)
        self.running.set()
        while not stop.wait(0.01):
            while not self._queue.empty():
                emit(self._queue.get())

    def request(self, action: ServerAction) -> Future[str]:
        self.requests.append(action)
        future: Future[str] = Future()
        future.set_result(f"{action} done")
        return future


def progress(done: int = 40, total: int | None = 100, **extra: object) -> CaptureProgress:
    """A batch progress snapshot with fixed figures (``extra``: counts or snapshot fields)."""
    fields: dict[str, object] = dict(
        state="running", total=total, already_done=0, done=done, written=done - 8, failed=2,
        flagged=5, rejected=1, retrying=0, interrupted=0, in_flight=8, output_tokens=done * 250,
        elapsed_s=60.0, samples_per_s=4.0, tokens_per_s=1000.0, eta_s=14.0,
        servers=(ServerStatus("http://127.0.0.1:30000", "ready", "", 8, 8, 50, 40, 2),),
        failures={"timeout": 2},
        flags={"tool_call": 4, "truncated": 1},
    )
    return progress_snapshot(**{**fields, **extra})


def batch(batch_id: str = "b1-demo", state: str = "running", **extra: object) -> BatchSnapshot:
    """A batch snapshot."""
    snap = BatchSnapshot(
        batch_id,
        Path("/data/out/demo"),
        Path("/data/prompts.jsonl"),
        ("http://127.0.0.1:30000",),
        state,
        progress=progress(state=state),
    )
    return replace(snap, **extra)  # type: ignore[arg-type]


class FakeCapture:
    """A ``CaptureControl`` that serves fixed snapshots and records every call."""

    def __init__(self, snapshots: Sequence[BatchSnapshot] = ()) -> None:
        self.snapshots = list(snapshots)
        self.calls: list[tuple[str, ...]] = []
        self.started: list[BatchRequest] = []
        self.events: dict[str, list[CaptureEvent]] = {}
        self.recent_rows: dict[str, list[ShardRow]] = {}
        self.followed: set[str] = set()
        """Batches whose event follower a test says still runs."""
        self._lock = threading.Lock()

    def batches(self) -> tuple[BatchSnapshot, ...]:
        return tuple(self.snapshots)

    def start(self, request: BatchRequest) -> str:
        self.started.append(request)
        batch_id = f"b{len(self.snapshots) + 1}-{request.out_dir.name}"
        self.snapshots.append(
            BatchSnapshot(batch_id, request.out_dir, request.prompts, request.servers, "starting")
        )
        return batch_id

    def pause(self, batch_id: str) -> None:
        self.calls.append(("pause", batch_id))

    def resume(self, batch_id: str) -> None:
        self.calls.append(("resume", batch_id))

    def stop(self, batch_id: str, *, abort: bool) -> None:
        self.calls.append(("stop", batch_id, "abort" if abort else "drain"))

    def watch(self, batch_id: str, count: int) -> None:
        self.calls.append(("watch", batch_id, str(count)))

    def add_events(self, batch_id: str, events: Sequence[CaptureEvent]) -> None:
        """Queue events for ``take_events``."""
        with self._lock:
            self.events.setdefault(batch_id, []).extend(events)

    def take_events(self, batch_id: str, limit: int = 10_000) -> list[CaptureEvent]:
        with self._lock:
            taken = self.events.get(batch_id, [])[:limit]
            self.events[batch_id] = self.events.get(batch_id, [])[limit:]
            return taken

    def following(self, batch_id: str) -> bool:
        with self._lock:
            return batch_id in self.followed or bool(self.events.get(batch_id))

    def recent(self, batch_id: str) -> list[ShardRow]:
        return list(self.recent_rows.get(batch_id, []))

    def close(self) -> None:
        self.calls.append(("close",))


@dataclass(frozen=True)
class Toast:
    """One ``notify`` call as the app received it."""

    message: str
    title: str
    severity: str


class NotifySpy:
    """Every toast the app is asked to show, recorded at ``App.notify`` (public API; every
    ``Widget.notify`` and ``Screen.notify`` goes through it) instead of read from Textual's
    private store of live toasts. Attach before ``run_test`` so a toast at mount is seen."""

    def __init__(self, app: App[object]) -> None:
        self.toasts: list[Toast] = []
        shown = app.notify

        def notify(message: str, *, title: str = "", severity: SeverityLevel = "information",
                   timeout: float | None = None, markup: bool = True) -> None:
            self.toasts.append(Toast(message, title, severity))
            shown(message, title=title, severity=severity, timeout=timeout, markup=markup)

        app.notify = notify  # type: ignore[method-assign]

    def __iter__(self) -> Iterator[Toast]:
        return iter(list(self.toasts))

    def __bool__(self) -> bool:
        return bool(self.toasts)

    def clear(self) -> None:
        """Forget the toasts so far (the test's ``app.clear_notifications()`` for the spy)."""
        self.toasts.clear()

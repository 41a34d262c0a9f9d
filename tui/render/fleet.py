"""The whole fleet on one screen: one row per server (pure: no widgets, no I/O).

``FleetBoard`` is what the Server view already knows about each server (its feed's newest
snapshot, acceptance reading and router view), kept where the Fleet view can read it: the
Server view's feeds are the only pollers, the Fleet view polls nothing. A router's workers
are rows too: watched ones (``--trust-router-workers``) have their own feed, the others are
shown as the router lists them. Capture columns come from the batches the Capture view
lists (each running batch's per-server in flight and rows done), summed per server URL.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eagle_tui.core.text import clip
from eagle_tui.tui.render.flags import flag_severity
from eagle_tui.tui.render.gpu import GB, server_pids
from eagle_tui.tui.render.server import SERVING, SHORT_PHASE, PhaseTone, phase_tone

if TYPE_CHECKING:
    from eagle_tui.core.health.snapshot import HealthSnapshot
    from eagle_tui.core.proc.report import GpuReport, ProcessReport
    from eagle_tui.core.sglang.router import RouterView, WorkerView
    from eagle_tui.tui.render.accept import AcceptanceReading
    from eagle_tui.tui.render.batch import BatchSnapshot

COLUMNS = ("server", "phase", "run", "que", "tok/s", "KV", "acc", "GPU", "cap", "cap/s",
           "flag")
"""Narrow on purpose (80 columns hold them all): ``que`` queued requests, ``acc`` accept
length, ``GPU`` GB held of GB, ``cap`` capture requests in flight on the server, ``cap/s``
rows it finishes there a second."""
NAME_CELLS = 22
RATE_WINDOW_S = 30.0
_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True)
class FleetRow:
    """One server as the table shows it; ``index`` is the feed whose card Enter opens (a
    router's worker with no feed of its own opens the router's card, which lists it)."""

    key: str
    index: int
    name: str
    phase: str
    tone: PhaseTone
    running: float | None = None
    queued: float | None = None
    tokens_per_s: float | None = None
    kv_use: float | None = None
    accept: float | None = None
    gpu_used: float | None = None
    gpu_total: float | None = None
    capture_in_flight: int | None = None
    capture_rate: float | None = None
    flag: str = ""
    idle: bool = False  # its last load figures expired (or it stopped serving): no load now


@dataclass
class ServerEntry:
    """What the Server view last received from one server's feed."""

    name: str
    url: str
    snapshot: HealthSnapshot | None = None
    acceptance: AcceptanceReading | None = None
    router: RouterView | None = None


@dataclass
class FleetBoard:
    """Every watched server by feed index; the Server view writes, the Fleet view reads."""

    servers: dict[int, ServerEntry] = field(default_factory=dict)
    watching: bool = False
    """True once the Server view runs its feeds (the Fleet view starts it otherwise)."""

    def watch(self, index: int, name: str, url: str) -> None:
        self.servers.setdefault(index, ServerEntry(name, url))

    def rows(self, capture: dict[str, tuple[int, float | None]] | None = None) -> list[FleetRow]:
        """One row per server, then one per router worker without a feed of its own."""
        capture = capture or {}
        rows = [server_row(index, entry, capture.get(entry.url))
                for index, entry in sorted(self.servers.items())]
        watched = {entry.url for entry in self.servers.values()}
        for index, entry in sorted(self.servers.items()):
            for worker in entry.router.workers if entry.router else ():
                if worker.url.rstrip("/") not in watched:
                    watched.add(worker.url.rstrip("/"))
                    rows.append(worker_row(index, entry.name, worker,
                                           capture.get(worker.url.rstrip("/"))))
        return rows


def server_row(index: int, entry: ServerEntry, capture: tuple[int, float | None] | None
               ) -> FleetRow:
    """A watched server's row from its newest snapshot and acceptance reading."""
    s = entry.snapshot
    if s is None:
        in_flight, rate = capture or NO_CAPTURE
        return FleetRow(entry.url, index, entry.name, "waiting", "busy",
                        capture_in_flight=in_flight, capture_rate=rate)
    load = s.load if s.load is not None and s.load.counts and phase_tone(s.phase) != "bad" \
        else None
    idle = s.load is not None and load is None and s.phase in SERVING
    used, total = gpu_memory(s.gpu, s.process)
    figure = entry.acceptance.live.figure if entry.acceptance else None
    in_flight, rate = capture or NO_CAPTURE
    return FleetRow(
        entry.url, index, entry.name, SHORT_PHASE.get(s.phase, s.phase.value),
        phase_tone(s.phase),
        running=load.running if load else None, queued=load.queued if load else None,
        tokens_per_s=load.throughput if load else None,
        kv_use=load.token_usage if load else None,
        accept=figure.accept_length if figure else None, gpu_used=used, gpu_total=total,
        flag=worst_flag(f.name for f in s.flags), capture_in_flight=in_flight,
        capture_rate=rate, idle=idle)


def worker_row(router_index: int, router: str, worker: WorkerView,
               capture: tuple[int, float | None] | None) -> FleetRow:
    """A router's worker that has no feed: the router's word and what the worker said
    (``unchecked``: healthy by the router's word only, never ``ready``; the phase column
    stays narrow)."""
    tone: PhaseTone = "ok" if worker.state == "ready" else (
        "bad" if worker.state in ("down", "unhealthy", "invalid") else "busy")
    name = f"{router} › {worker.url.split('://', 1)[-1]}"
    in_flight, rate = capture or NO_CAPTURE
    return FleetRow(worker.url, router_index, name, worker.state, tone,
                    running=worker.probe.running, queued=worker.probe.queued,
                    capture_in_flight=in_flight, capture_rate=rate)


NO_CAPTURE: tuple[int | None, float | None] = (None, None)


def worst_flag(names: Iterable[str]) -> str:
    """The most severe raised flag (``fatal:oom`` before ``stalled`` before info), or ""."""
    ranked = sorted(names, key=lambda name: _SEVERITY_ORDER[flag_severity(name)])
    return ranked[0] if ranked else ""


def gpu_memory(gpu: GpuReport | None, process: ProcessReport | None
               ) -> tuple[float | None, float | None]:
    """GB the server's processes hold, of the GPUs they hold it on (None: not seen here)."""
    if gpu is None or not gpu.available:
        return None, None
    ours = server_pids(process)
    used = total = 0
    for device in gpu.devices:
        held = [p.used_bytes or 0 for p in device.processes if p.pid in ours]
        if held:
            used += sum(held)
            total += device.total_bytes
    return (used / GB, total / GB) if total else (None, None)


class CaptureRates:
    """Per server URL: requests in flight now and rows finished per second, over every batch
    the Capture source lists (a server shared by two batches sums both)."""

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        self.window_s = window_s
        self._done: dict[str, deque[tuple[float, int]]] = {}

    def update(self, now: float, batches: Sequence[BatchSnapshot]
               ) -> dict[str, tuple[int, float | None]]:
        """``{url: (in flight, rows/s)}`` for the servers a live batch sends to."""
        in_flight: dict[str, int] = {}
        done: dict[str, int] = {}
        for batch in batches:
            for server in batch.progress.servers if batch.progress and batch.live else ():
                in_flight[server.url] = in_flight.get(server.url, 0) + server.in_flight
                done[server.url] = done.get(server.url, 0) + server.succeeded
        return {url: (in_flight[url], self._rate(url, now, done[url])) for url in in_flight}

    def _rate(self, url: str, now: float, done: int) -> float | None:
        looks = self._done.setdefault(url, deque())
        looks.append((now, done))
        while len(looks) > 2 and now - looks[1][0] >= self.window_s:
            looks.popleft()
        first_at, first_done = looks[0]
        return max(0.0, (done - first_done) / (now - first_at)) if now > first_at else None


def cells(row: FleetRow) -> tuple[str, ...]:
    """The row's cells as text, in ``COLUMNS`` order ("-" where nothing is known)."""
    gpu = "-" if row.gpu_used is None or row.gpu_total is None else (
        f"{row.gpu_used:.0f}/{row.gpu_total:.0f}")
    running = "idle" if row.idle and row.running is None else _num(row.running)
    return (clip(row.name, NAME_CELLS), row.phase, running, _num(row.queued),
            _num(row.tokens_per_s),
            "-" if row.kv_use is None else f"{row.kv_use:.0%}",
            "-" if row.accept is None else f"{row.accept:.2f}", gpu,
            _num(row.capture_in_flight),
            "-" if row.capture_rate is None else f"{row.capture_rate:.1f}", row.flag or "")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def summary(rows: Sequence[FleetRow]) -> str:
    """``16 servers: 12 ready, 3 starting, 1 down · 2 flagged · running 40 · queued 3 ·
    12,345 tok/s · capture 64 in flight, 12.3 rows/s``."""
    tones = {"ok": 0, "busy": 0, "warn": 0, "bad": 0}
    for row in rows:
        tones[row.tone] += 1
    live = [row for row in rows if row.tone != "bad"]  # a down server has no load
    parts = [f"{len(rows)} server{'s' if len(rows) != 1 else ''}: {tones['ok']} ready, "
             f"{tones['busy']} starting, {tones['warn']} degraded, {tones['bad']} down",
             f"{sum(1 for row in rows if row.flag)} flagged",
             f"running {sum(row.running or 0 for row in live):,.0f}",
             f"queued {sum(row.queued or 0 for row in live):,.0f}",
             f"{sum(row.tokens_per_s or 0 for row in live):,.0f} tok/s"]
    capturing = [row for row in rows if row.capture_in_flight is not None]
    if capturing:
        rate = sum(row.capture_rate or 0 for row in capturing)
        parts.append(f"capture {sum(row.capture_in_flight or 0 for row in capturing)} in "
                     f"flight, {rate:.1f} rows/s")
    return " · ".join(parts)


def row_matches(row: FleetRow, needle: str) -> bool:
    """The filter: ``needle`` (case-insensitive) in any cell of the row."""
    wanted = needle.lower()
    return any(wanted in cell.lower() for cell in cells(row))


def sort_value(row: FleetRow, column: int) -> tuple[int, float | str]:
    """A key sorting by ``column``: numbers as numbers, unknown ("-") last; the phase by
    tone (down first), the flag by severity."""
    if column == 0:
        return (0, row.name.lower())
    if column == 1:
        return (["bad", "warn", "busy", "ok"].index(row.tone), row.phase)
    if column == len(COLUMNS) - 1:
        return (_SEVERITY_ORDER[flag_severity(row.flag)], row.flag) if row.flag else (9, "")
    numbers = (row.running, row.queued, row.tokens_per_s, row.kv_use, row.accept,
               row.gpu_used, row.capture_in_flight, row.capture_rate)
    value = numbers[column - 2]
    return (1, 0.0) if value is None else (0, -value)

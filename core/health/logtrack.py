"""Fold parsed log events into what the log says about a start-up.

The tracker knows which phase the log has reached (per rank too), when each phase began,
when the log last made progress, the longest silence per phase (for history), the fatal
lines, the shutdown line, and the figures worth showing (shards, KV cache, graphs, limits).
A new ``server_args`` line after a finished start-up means the server was started again
in the same log, and the tracker starts over.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace

from eagle_tui.core.health.phase import Phase, later, startup_rank
from eagle_tui.core.health.snapshot import StartupProgress
from eagle_tui.core.serverlog import events as ev
from eagle_tui.core.serverlog.follower import LogChunk
from eagle_tui.core.serverlog.parser import parse_line, split_glued

# The line naming the exception at the end of a Python traceback, e.g.
# "torch.OutOfMemoryError: CUDA out of memory." or "IndexError: index out of range".
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b.*")
# Timestamps further than this from our clock are not trusted to date the backlog.
_MAX_TIMESTAMP_SKEW_S = 86_400.0


@dataclass(frozen=True)
class TimedFatal:
    """A fatal line and when it arrived."""

    event: ev.Fatal
    at: float


def _phase_of(event: ev.LogEvent) -> Phase | None:
    match event:
        case ev.ServerArgsSeen():
            return Phase.LAUNCHING
        case ev.WeightLoadBegin() | ev.ShardProgress():
            return Phase.LOADING_WEIGHTS
        case ev.WeightLoadEnd() | ev.KvCacheAllocated() | ev.MemoryPoolEnd():
            return Phase.ALLOCATING_KV
        case ev.GraphCaptureBegin() | ev.GraphCaptureProgress() | ev.GraphCaptureEnd():
            return Phase.CAPTURING_GRAPHS
        case ev.ServerProcessStarted() | ev.AppStartupComplete() | ev.PortBound():
            return Phase.WARMING_UP
        case ev.ServerReady():
            return Phase.READY
    return None


def _is_our_probe(event: ev.LogEvent) -> bool:
    # The watcher's own /health probes show up as access lines; they prove nothing.
    return isinstance(event, ev.HttpAccess) and event.path.startswith("/health")


def _timestamp_wall(stamp: str | None) -> float | None:
    """Wall time of a log timestamp; a whole-second stamp counts as the end of its second."""
    if stamp is None:
        return None
    try:
        seconds = time.mktime(time.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S"))
    except (ValueError, OverflowError):
        return None
    fraction = stamp[20:23]
    return seconds + (int(fraction) / 1000 if fraction.isdigit() else 1.0)


class LogTracker:
    """What the log has said so far; ``feed`` it every chunk the follower returns."""

    def __init__(self, *, date_backlog: bool = True) -> None:
        self._date_backlog = date_backlog
        self._first_read_done = False
        self._last_partial = ""
        self.generation = 0
        self.reset()

    def reset(self) -> None:
        """Forget the start-up seen so far (the server was started again)."""
        self.generation += 1
        self.phase: Phase | None = None
        self.phase_since: dict[Phase, float] = {}
        self.ranks: dict[str, Phase] = {}
        self.fatals: list[TimedFatal] = []
        self.shutdown: ev.Shutdown | None = None
        self.drain_remaining: int | None = None
        self.shutdown_at: float | None = None
        self.last_line: str | None = None
        self.last_line_at: float | None = None
        self.last_progress_at: float | None = None
        self.max_gap: dict[Phase, float] = {}
        self.server_args: dict[str, str] = {}
        self.args_at: float | None = None
        self.pid_from_log: int | None = None
        self.port_bound: ev.PortBound | None = None
        self.load: ev.BatchStats | None = None
        self.load_at: float | None = None
        self.exception_line: str | None = None
        self.lines = 0
        self.progress = StartupProgress()

    def feed(self, chunk: LogChunk, now: float, wall: float) -> None:
        """Apply every complete line of ``chunk``, then its live partial line."""
        backlog = self._date_backlog and not self._first_read_done
        self._first_read_done = self._first_read_done or bool(chunk.lines or chunk.partial)
        at = now
        for text in chunk.lines:
            if not text.strip():
                continue
            for part in split_glued(text):
                event = parse_line(part)
                if backlog:
                    at = self._backlog_time(event, now, wall, at)
                self.apply(event, at)
        self._feed_partial(chunk.partial, now)

    def _feed_partial(self, partial: str, now: float) -> None:
        if not partial.strip() or partial == self._last_partial:
            return
        self._last_partial = partial
        event = parse_line(partial, partial=True)
        if isinstance(event, ev.ShardProgress | ev.GraphCaptureProgress):
            self.apply(event, now)

    def _backlog_time(self, event: ev.LogEvent, now: float, wall: float, previous: float) -> float:
        stamp = _timestamp_wall(event.line.timestamp)
        if stamp is None:
            return previous if previous <= now else now
        age = wall - stamp
        if abs(age) > _MAX_TIMESTAMP_SKEW_S:
            return now
        return now - max(0.0, age)

    def apply(self, event: ev.LogEvent, at: float) -> None:
        """Fold one event that arrived at monotonic time ``at``."""
        if isinstance(event, ev.ServerArgsSeen) and startup_rank(self.phase or Phase.LAUNCHING) > 0:
            self.reset()
        self.lines += 1
        self.last_line = event.line.text
        self.last_line_at = at
        if not _is_our_probe(event):
            self._note_progress(at)
        self._advance_phase(event, at)
        self._record(event, at)

    def _note_progress(self, at: float) -> None:
        if self.last_progress_at is not None and self.phase is not None:
            gap = max(0.0, at - self.last_progress_at)
            self.max_gap[self.phase] = max(self.max_gap.get(self.phase, 0.0), gap)
        self.last_progress_at = at

    def _advance_phase(self, event: ev.LogEvent, at: float) -> None:
        phase = _phase_of(event)
        if isinstance(event, ev.HttpAccess) and self.phase is not None:
            phase = Phase.WARMING_UP  # the port is open: only warm-up is left
        if phase is None:
            return
        if event.line.ranks:
            self.ranks[event.line.ranks] = later(self.ranks.get(event.line.ranks), phase)
        reached = later(self.phase, phase)
        if reached != self.phase:
            self.phase = reached
            self.phase_since.setdefault(reached, at)

    def _record(self, event: ev.LogEvent, at: float) -> None:
        p = self.progress
        match event:
            case ev.ServerArgsSeen(fields=fields):
                self.server_args = dict(fields)
                self.args_at = at
            case ev.WeightLoadBegin(avail_gb=avail):
                self.progress = replace(p, avail_gb=avail)
            case ev.ShardProgress(percent=pct, done=done, total=total):
                self.progress = replace(p, shards_percent=pct, shards_done=done, shards_total=total)
            case ev.WeightLoadEnd(avail_gb=avail, mem_usage_gb=used):
                self.progress = replace(p, avail_gb=avail, weights_gb=used)
            case ev.KvCacheAllocated(tokens=tokens, size_gb=size):
                self.progress = replace(p, kv_tokens=tokens, kv_size_gb=size)
            case ev.MemoryPoolEnd(avail_gb=avail):
                self.progress = replace(p, avail_gb=avail)
            case ev.GraphsDisabled():
                self.progress = replace(p, graphs_disabled=True)
            case ev.GraphCaptureProgress(percent=pct, batch_size=bs, avail_gb=avail):
                self.progress = replace(p, graph_percent=pct, graph_batch_size=bs, avail_gb=avail)
            case ev.GraphCaptureEnd():
                self.progress = replace(p, graph_stages_done=p.graph_stages_done + 1)
            case ev.SchedulerLimits():
                self.progress = replace(
                    p,
                    max_total_num_tokens=event.max_total_num_tokens,
                    max_running_requests=event.max_running_requests,
                    context_len=event.context_len,
                )
            case _:
                self._record_runtime(event, at)

    def _record_runtime(self, event: ev.LogEvent, at: float) -> None:
        match event:
            case ev.ServerProcessStarted(pid=pid):
                self.pid_from_log = pid
            case ev.PortBound():
                self.port_bound = event
            case ev.HttpAccess(method="POST", path="/generate", status=200):
                if self.phase != Phase.READY:
                    self.progress = replace(self.progress, warmup_done=True)
            case ev.Fatal():
                if all(f.event.kind != event.kind for f in self.fatals):
                    self.fatals.append(TimedFatal(event, at))
            case ev.Shutdown(remaining=remaining):
                if self.shutdown is None:  # the first line (SIGTERM received) says why
                    self.shutdown, self.shutdown_at = event, at
                if remaining is not None:
                    self.drain_remaining = remaining
            case ev.BatchStats():
                self.load, self.load_at = event, at
            case ev.OtherLine(line=line) if _EXCEPTION_LINE.match(line.text):
                self.exception_line = line.text

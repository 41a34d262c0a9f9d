"""Fold parsed log events into what the log says about a start-up.

The tracker knows which phase and step the log has reached (per rank too), when each
began, when the log last wrote a line, the pace of progress bars, the longest silence per
phase and step (for history), the failure evidence (``crashlog``), the shutdown line, the
lines it could not read (counted, the latest kept), and the figures worth showing.

Times: lines read as they are written are dated by their arrival. A backlog (the file's
content when it is first opened, or reopened after a rotation or truncation) is dated by
the lines' own timestamps on the log's clock (``logclock``), so a watch that attaches late
sees true times: how long the log has been silent, when each phase began.

A new incarnation of the server in the same log (a ``server_args`` line after the start-up
moved on, also in a truncated or rotated file) starts the tracker over; ``generation``
counts them so the state can close the previous start-up.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import replace

from eagle_tui.core.health import timings
from eagle_tui.core.health.crashlog import CrashLog, TimedFatal
from eagle_tui.core.health.logclock import LogClock, stamp_epoch
from eagle_tui.core.health.phase import Phase, later
from eagle_tui.core.health.ranks import RankProgress, Topology
from eagle_tui.core.health.snapshot import StartupProgress
from eagle_tui.core.health.steps import STEP_PHASE, BarPace, Step, later_step, step_of
from eagle_tui.core.outside import clean
from eagle_tui.core.serverlog import events as ev
from eagle_tui.core.serverlog.follower import LogChunk
from eagle_tui.core.serverlog.ourpolls import OUR_POLLS
from eagle_tui.core.serverlog.parser import parse_line, parse_text
from eagle_tui.core.serverlog.prefix import Stamp
from eagle_tui.core.serverlog.serverargs import extract_server_args

_KEPT_UNKNOWN = 20
_KEPT_WARNINGS = 20
_KEPT_GAPS = 9  # the decode-log interval is their median: an idle pause is one outlier
_ARGS_WRAP_LINES = 60  # a hard-wrapped server_args line (a terminal paste) goes on this long
_FRAME = re.compile(r'^  File "|^ {4,}\S|^\s+\^+\s*$')


def _is_our_probe(event: ev.LogEvent) -> bool:
    # The watcher's own polls show up as access lines; they prove nothing.
    return isinstance(event, ev.HttpAccess) and bool(OUR_POLLS.search(event.line.text))


def _end_of_stamp(stamp: Stamp | None, reference: float) -> float | None:
    """A stamp's time on the log's clock; a whole-second stamp counts as the end of its
    second (the line was written some time within it)."""
    if stamp is None:
        return None
    epoch = stamp_epoch(stamp, reference)
    if epoch is None:
        return None
    return epoch + (1.0 if stamp.second == int(stamp.second) else 0.0)


def _last_write(mtime: float | None, now: float, wall: float) -> float:
    """The file's last write (its modification time) on the monotonic clock; ``now``
    without one."""
    return now - max(0.0, wall - mtime) if mtime is not None else now


class LogTracker:
    """What the log has said so far; ``feed`` it every chunk the follower returns."""

    def __init__(self, *, date_backlog: bool = True) -> None:
        self._date_backlog = date_backlog
        self._first_read_done = False
        self._last_partial = ""
        self.clock = LogClock()
        self.generation = 0
        self.reset()

    def reset(self) -> None:
        """Forget the start-up seen so far (the server was started again)."""
        self.generation += 1
        self.phase: Phase | None = None
        self.step: Step | None = None
        self.step_line: str | None = None  # the line that brought the start-up to ``step``
        self.phase_line: str | None = None  # the line that began ``phase``
        self.phase_since: dict[Phase, float] = {}
        self.step_since: dict[Step, float] = {}
        self.ranks = RankProgress()
        self.crash = CrashLog()
        self.bars: dict[str, BarPace] = {}
        self.shutdown: ev.Shutdown | None = None
        self.drain_remaining: int | None = None
        self.shutdown_at: float | None = None
        self._last_text: str | None = None  # the newest line as written
        self.last_line_at: float | None = None
        self._said_text: str | None = None  # the last line that is not one of our own polls
        self.said_at: float | None = None
        self.last_progress_at: float | None = None
        self.first_line_at: float | None = None
        self.max_gap: dict[Phase, float] = {}
        self.max_step_gap: dict[Step, float] = {}
        self.server_args: dict[str, str] = {}
        self.engine_timings: dict[str, float] = {}
        self.args_at: float | None = None
        self.args_dated = False  # the server_args line's time is known (live, or stamped)
        self._args_text: str | None = None  # an unfinished (hard-wrapped) server_args line
        self.pid_from_log: int | None = None
        self.port_bound: ev.PortBound | None = None
        self.load: ev.BatchStats | None = None
        self.load_at: float | None = None
        self.decode_gaps: deque[float] = deque(maxlen=_KEPT_GAPS)  # between Decode lines
        self.lines = 0
        self.unknown = 0
        self._unknown_texts: deque[str] = deque(maxlen=_KEPT_UNKNOWN)
        self.warnings: deque[ev.WarningLine] = deque(maxlen=_KEPT_WARNINGS)
        self.progress = StartupProgress()
        self._previous: ev.LogEvent | None = None
        self._in_backlog = False

    # -- compatibility views -----------------------------------------------------------------

    @property
    def fatals(self) -> list[TimedFatal]:
        """The fatal lines so far."""
        return self.crash.fatals

    @property
    def exception_line(self) -> str | None:
        """The latest exception line (the end of a traceback)."""
        return self.crash.exception_line

    @property
    def last_line(self) -> str | None:
        """The newest line, made clean (``core.outside``): quoted in flags, shown as "last
        log" everywhere. Cleaned when asked for, not for each line of a backlog."""
        return None if self._last_text is None else clean(self._last_text)

    @property
    def said_line(self) -> str | None:
        """The last line that is not one of our own polls, made clean like ``last_line``."""
        return None if self._said_text is None else clean(self._said_text)

    @property
    def unknown_lines(self) -> tuple[str, ...]:
        """The latest lines no pattern read, made clean like ``last_line``."""
        return tuple(clean(text) for text in self._unknown_texts)

    @property
    def topology(self) -> Topology:
        """The deployment the ``server_args`` line describes."""
        return Topology.from_fields(self.server_args)

    # -- feeding -----------------------------------------------------------------------------

    def feed(self, chunk: LogChunk, now: float, wall: float) -> None:
        """Apply every complete line of ``chunk``, then its live partial line."""
        # A truncated or rotated file alone is not a restart: logrotate's copytruncate does
        # that to a live server. The new server's server_args line (or a new PID, seen by the
        # state) starts the new timeline; the reopened file's lines are dated as a backlog.
        events = [e for text in chunk.lines if text.strip() for e in parse_text(text)]
        reopened = bool({"rotated", "truncated"} & set(chunk.notes))
        backlog = self._date_backlog and (not self._first_read_done or reopened)
        self._first_read_done = self._first_read_done or bool(chunk.lines or chunk.partial)
        dated = self._date(events, chunk.mtime, now, wall) if backlog else None
        self._in_backlog = backlog
        for index, event in enumerate(events):
            self.apply(event, dated[index] if dated is not None else now)
        self._in_backlog = False
        # A backlog's unterminated bar was drawn when the file was last written, not now.
        self._feed_partial(chunk.partial, _last_write(chunk.mtime, now, wall) if backlog else now)

    def _feed_partial(self, partial: str, now: float) -> None:
        if not partial.strip() or partial == self._last_partial:
            return
        self._last_partial = partial
        event = parse_line(partial.split("\r")[-1] or partial, partial=True)
        if isinstance(event, ev.ShardProgress | ev.GraphCaptureProgress):
            self.apply(event, now)

    def _date(
        self, events: list[ev.LogEvent], mtime: float | None, now: float, wall: float
    ) -> list[float]:
        """Monotonic times for a backlog: by the lines' stamps, else by the file's mtime."""
        reference = self.clock.log_time(mtime if mtime is not None else wall)
        epochs = [_end_of_stamp(e.line.stamp, reference) for e in events]
        stamped = [x for x in epochs if x is not None]
        if mtime is not None and stamped:
            self.clock.learn_backlog(max(stamped), mtime)
        end = _last_write(mtime, now, wall)
        first = next((x for x in epochs if x is not None), None)
        previous = self._at_of(first, now, wall, end) if first is not None else end
        times = []
        for epoch in epochs:
            if epoch is not None:
                previous = max(previous, self._at_of(epoch, now, wall, end))
            times.append(previous)
        if epochs and epochs[-1] is None:
            times[-1] = max(previous, end)  # the file's last write: its last, unstamped line
        return times

    def _at_of(self, epoch: float, now: float, wall: float, end: float) -> float:
        return min(now - (wall - self.clock.to_wall(epoch)), end)

    # -- folding -----------------------------------------------------------------------------

    def apply(self, event: ev.LogEvent, at: float) -> None:
        """Fold one event dated to monotonic time ``at``."""
        if isinstance(event, ev.ServerArgsSeen) and self._restarted():
            self.reset()  # the server was started again in the same log
        self.lines += 1
        self.first_line_at = self.first_line_at if self.first_line_at is not None else at
        self._last_text = event.line.text
        if not isinstance(event, ev.OtherLine):
            self._args_text = None  # a recognised line ends any wrapped server_args
        if not _is_our_probe(event):
            self._note_silence(at)
            self._said_text, self.said_at = event.line.text, at
        self.last_line_at = at
        self._advance(event, at)
        stopping = self.shutdown is not None or bool(self.crash.stop_echoes)
        self.crash.note(event, at, stopping=stopping)
        self._record(event, at)
        self._previous = event

    def _restarted(self) -> bool:
        """A server_args line now means a new server (this one had moved on or ended)."""
        if self.step is None:
            return False
        return self.step != Step.LAUNCHING or self.crash.failed or self.shutdown is not None

    def _note_silence(self, at: float) -> None:
        if self.last_progress_at is not None:
            gap = max(0.0, at - self.last_progress_at)
            if self.phase is not None:
                self.max_gap[self.phase] = max(self.max_gap.get(self.phase, 0.0), gap)
            if self.step is not None:
                self.max_step_gap[self.step] = max(self.max_step_gap.get(self.step, 0.0), gap)
        self.last_progress_at = at

    def _advance(self, event: ev.LogEvent, at: float) -> None:
        step = step_of(event, self.step)
        if isinstance(event, ev.HttpAccess) and self.step is not None and not _is_our_probe(event):
            step = Step.WARMUP  # the port is open: only warm-up is left
        if step is None:
            return
        self._note_rank(event, step)
        self._note_bar(event, at)
        reached = later_step(self.step, step)
        if reached != self.step:
            self.step = reached
            self.step_line = clean(event.line.text)
            self.step_since.setdefault(reached, at)
            self.crash.progressed()
        phase = later(self.phase, STEP_PHASE[reached])
        if phase != self.phase:
            self.phase = phase
            self.phase_line = clean(event.line.text)
            self.phase_since.setdefault(phase, at)

    def _note_rank(self, event: ev.LogEvent, step: Step) -> None:
        if event.line.ranks:
            self.ranks.note(event.line.ranks, step)
        elif isinstance(event, ev.DistributedInit) and event.device is not None:
            self.ranks.note_device(event.device, step, event.line.message, self.topology)

    def _note_bar(self, event: ev.LogEvent, at: float) -> None:
        if isinstance(event, ev.ShardProgress):
            self.bars.setdefault("weights", BarPace()).update(event.done, at, event.rate_s)
        elif isinstance(event, ev.GraphCaptureProgress) and event.percent is not None:
            self.bars.setdefault("graphs", BarPace()).update(event.done, at, event.rate_s)

    def _record(self, event: ev.LogEvent, at: float) -> None:
        p = self.progress
        match event:
            case ev.ServerArgsSeen(fields=fields):
                self.server_args = dict(fields)
                self.args_at = at
                self.args_dated = not self._in_backlog or event.line.stamp is not None
                text = event.line.message.rstrip()
                self._args_text = None if text.endswith((")", "}")) else text
            case ev.WeightLoadBegin(avail_gb=avail):
                self.progress = replace(p, avail_gb=avail)
            case ev.ShardProgress(percent=pct, done=done, total=total):
                self.progress = replace(p, shards_percent=pct, shards_done=done, shards_total=total)
            case ev.WeightLoadEnd(avail_gb=avail, mem_usage_gb=used):
                self.progress = replace(
                    p, avail_gb=avail if avail is not None else p.avail_gb, weights_gb=used
                )
            case ev.KvCacheAllocated(tokens=tokens, size_gb=size):
                self.progress = replace(p, kv_tokens=tokens, kv_size_gb=size)
            case ev.MemoryPoolEnd(avail_gb=avail):
                self.progress = replace(p, avail_gb=avail)
            case ev.GraphsDisabled():
                self.progress = replace(p, graphs_disabled=True)
            case ev.GraphCaptureProgress(percent=pct, batch_size=bs, avail_gb=avail):
                if pct is not None:
                    self.progress = replace(
                        p,
                        graph_percent=pct,
                        graph_batch_size=bs if bs is not None else p.graph_batch_size,
                        avail_gb=avail if avail is not None else p.avail_gb,
                    )
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
            case ev.Shutdown(remaining=remaining):
                if self.shutdown is None:  # the first line (SIGTERM received) says why
                    self.shutdown, self.shutdown_at = event, at
                if remaining is not None:
                    self.drain_remaining = remaining
            case ev.BatchStats():
                self._note_load(event, at)
            case ev.WarningLine():
                self.warnings.append(event)
            case ev.Routine(line=line):
                figures = timings.parse_log_line(line.text)
                if figures is not None:  # SGLang's own phase times, for history
                    self.engine_timings = figures
            case ev.OtherLine(line=line):
                self._other(line)

    def _note_load(self, batch: ev.BatchStats, at: float) -> None:
        previous, previous_at = self.load, self.load_at
        if batch.kind == "decode" and previous is not None and previous_at is not None and (
                previous.kind == "decode"):
            self.decode_gaps.append(max(0.0, at - previous_at))  # the decode-log interval
        self.load, self.load_at = batch, at

    def _other(self, line: ev.LogLine) -> None:
        if self._continues_args(line):
            return
        figures = timings.parse_log_line(line.text)
        if figures is not None:
            self.engine_timings = figures  # SGLang's own phase times, for history
            return
        if self.crash.traceback_open or _FRAME.match(line.text):
            return  # a traceback's frames: read, and quoted by their exception line
        self.unknown += 1
        self._unknown_texts.append(line.text)

    def _continues_args(self, line: ev.LogLine) -> bool:
        """A hard-wrapped ``server_args`` line (cut mid-word by a terminal paste): join the
        pieces until the closing bracket and read the fields the first piece lacked."""
        text = self._args_text
        if text is None or not isinstance(self._previous, ev.ServerArgsSeen | ev.OtherLine):
            self._args_text = None
            return False
        text += line.text.rstrip("\n")
        done = text.rstrip().endswith((")", "}")) or len(text) > _ARGS_WRAP_LINES * 400
        self._args_text = None if done else text
        extra = extract_server_args(text)
        self.server_args.update({k: v for k, v in extra.items() if k not in self.server_args})
        return True

"""One start-up timeline (an ``Incarnation``) and its times.

``Timeline`` reads an incarnation together with what was observed and what the log said:
when the start-up began (its anchor), how long it has run, when each phase started and how
long each took. Times run from the anchor (our launch, the process's start, the log's
``server_args`` line, or the watch) to now, or to the moment the process ended, so no phase
is longer than the run. It changes nothing; ``enter`` and ``aged_flags`` move the
incarnation on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eagle_tui.core.health.flags import Raised
from eagle_tui.core.health.logtrack import LogTracker
from eagle_tui.core.health.observed import Observed
from eagle_tui.core.health.phase import STARTUP_PHASES, Phase, later
from eagle_tui.core.health.snapshot import Flag, Verdict
from eagle_tui.core.serverlog import events as ev

TIMELINE = (*STARTUP_PHASES, Phase.READY)
TERMINAL = (Phase.CRASHED, Phase.DOWN)
_SEEN_START_SLACK_S = 5.0


@dataclass
class Incarnation:
    """One start-up timeline of the server."""

    generation: int
    launched_at: float | None = None
    pid: int | None = None
    starts: dict[Phase, float] = field(default_factory=dict)
    phase: Phase | None = None
    phase_entered: float = 0.0
    was_ready: bool = False
    ready_at: float | None = None
    ready_after: float | None = None  # frozen when ready is reached
    ended_at: float | None = None
    flag_since: dict[str, float] = field(default_factory=dict)
    verdict: Verdict | None = None
    reached: Phase | None = None
    closed: bool = False
    number: int = 1
    first_phase: Phase | None = None  # what the first look found (ready: an attach)
    first_entered: float | None = None  # when the first informed look found its phase

    def outcome(self) -> str:
        """The verdict's outcome so far (``unknown`` before any)."""
        return self.verdict.outcome.value if self.verdict is not None else "unknown"


def implied_phase(fatal: ev.Fatal) -> Phase:
    """The start-up phase a fatal line shows the server was in (launching when it says not).

    An old log may print no phase line before failing: its KV-cache shortage still happened
    while allocating the KV cache, a failed capture while capturing graphs, a failed warm-up
    request or bind while warming up.
    """
    text = fatal.line.text
    if fatal.kind == "oom" and ("mem-fraction-static" in text or "KV cache" in text):
        return Phase.ALLOCATING_KV
    if fatal.kind == "graph_capture_failed":
        return Phase.CAPTURING_GRAPHS
    if fatal.kind in ("address_in_use", "port_in_use") or "warmup" in text:
        return Phase.WARMING_UP
    return Phase.LAUNCHING


@dataclass(frozen=True)
class Timeline:
    """The times of ``run``, read with what was ``seen`` and what the ``log`` said."""

    run: Incarnation
    seen: Observed
    log: LogTracker | None

    def anchor(self) -> tuple[float, str]:
        """When this start-up began (monotonic) and how we know."""
        run, log = self.run, self.log
        if run.launched_at is not None:
            return run.launched_at, "launch"
        process = self.seen.process
        if process is not None and process.pid == run.pid:
            created = self.seen.mono_of(process.create_time)
            log_start = log.args_at if log is not None else None
            if created is not None and (log_start is None or created <= log_start + 1.0):
                return created, "process"
        if log is not None and log.args_at is not None:
            return log.args_at, "log"
        assert self.seen.started is not None
        return self.seen.started, "watch"

    def beginning_seen(self) -> bool:
        """The start of this start-up was watched, or can be read from the log's dates; an
        attach to a server that was already up never counts."""
        anchor, how = self.anchor()
        if how == "launch":
            return True
        if self.run.first_phase in (Phase.READY, Phase.DEGRADED):
            return False
        assert self.seen.started is not None
        if how == "process" and anchor >= self.seen.started - _SEEN_START_SLACK_S:
            return True
        return self.log is not None and self.log.args_at is not None and self.log.args_dated

    def readiness_seen(self) -> bool:
        """The watch saw the server become ready, so how long its start-up took is known:
        its beginning was seen, or it was seen not ready first (``/health`` failing or
        refused, or a log line of an earlier phase). Attached to a server already up (a
        first ``/health`` answer of 200, no log), the start-up time is unknown: taking it
        from the attach would invent it."""
        if self.beginning_seen():
            return True
        health = self.seen.health
        if health.failures or health.refusals:
            return True
        return self.log is not None and bool(set(self.log.phase_since) - {Phase.READY})

    def elapsed(self) -> float:
        """Seconds from the anchor to now (or to the process's end)."""
        end = self.run.ended_at if self.run.ended_at is not None else self.seen.now
        return max(0.0, end - self.anchor()[0])

    def phase_starts(self) -> dict[Phase, float]:
        """When each phase of this start-up began (the log's dating wins where it has one)."""
        starts = dict(self.run.starts)
        if self.log is not None:
            for phase, at in self.log.phase_since.items():
                starts[phase] = min(at, starts.get(phase, at))
        anchor = self.anchor()[0]
        starts = {p: max(at, anchor) if p in TIMELINE else at for p, at in starts.items()}
        order = {phase: index for index, phase in enumerate(Phase)}
        return dict(sorted(starts.items(), key=lambda item: (item[1], order[item[0]])))

    def durations(self, now: float) -> tuple[tuple[Phase, float], ...]:
        """How long each start-up phase took (the last one up to ``now`` or the end)."""
        starts = self.phase_starts()
        seen = [p for p in TIMELINE if p in starts]
        end_of_run = self.run.ended_at if self.run.ended_at is not None else now
        result: list[tuple[Phase, float]] = []
        for index, phase in enumerate(seen):
            following = seen[index + 1] if index + 1 < len(seen) else None
            if phase == Phase.READY:
                break
            end = starts[following] if following is not None else end_of_run
            result.append((phase, max(0.0, end - starts[phase])))
        return tuple(result)

    def phase_seconds(self, phase: Phase, now: float) -> float | None:
        """How long the server has been in ``phase``: since the line that began it, the
        change seen while watching, or (launching) the process's start; None when the first
        look found it there and nothing dates it (never counted from the attach)."""
        attached = self._found_at_first_look()
        if phase in TERMINAL:
            if not attached:
                return max(0.0, now - self.run.phase_entered)
            ended = self.run.ended_at
            return None if ended is None else max(0.0, now - ended)
        if attached and not self._dated(phase):
            return None
        start = self.phase_starts().get(phase, self.run.phase_entered)
        return max(0.0, now - start)

    def _found_at_first_look(self) -> bool:
        """The first look of a watch that attached found the phase, and it has not moved."""
        run = self.run
        return (run.launched_at is None and run.number == 1
                and run.phase_entered == run.first_entered)

    def _dated(self, phase: Phase) -> bool:
        """A line of the log began ``phase``, or it is launching since the process started."""
        if self.log is not None and phase in self.log.phase_since:
            return True
        return phase == Phase.LAUNCHING and self.anchor()[1] in ("launch", "process")

    def ready_time(self, now: float) -> float:
        """When it became ready: the log's "ready" line where it has one, else ``now``."""
        if self.log is not None and Phase.READY in self.log.phase_since:
            return min(now, self.log.phase_since[Phase.READY])
        return now


def note_reached(run: Incarnation, phase: Phase, log: LogTracker | None) -> None:
    """The furthest start-up phase this incarnation shows (the log's word first)."""
    if log is not None and log.phase is not None:
        run.reached = log.phase
    elif phase in TIMELINE:
        run.reached = phase
    if log is not None:
        for timed in log.fatals:
            run.reached = later(run.reached, implied_phase(timed.event))
        if run.reached is None and log.lines:
            run.reached = Phase.LAUNCHING  # it logged, so it was at least launching


def enter(timeline: Timeline, phase: Phase, now: float) -> bool:
    """Move the incarnation into ``phase`` at ``now``; True when it just became ready for
    the first time (the caller forgets the failures counted while starting)."""
    run = timeline.run
    note_reached(run, phase, timeline.log)
    if phase == run.phase:
        return False
    became_ready = phase == Phase.READY and not run.was_ready
    if became_ready:
        run.ready_at = timeline.ready_time(now)
        if timeline.readiness_seen():
            run.ready_after = max(0.0, run.ready_at - timeline.anchor()[0])
    if phase in TERMINAL and run.ended_at is None:
        run.ended_at = _logged_end(timeline)
    run.phase = phase
    run.phase_entered = now
    run.starts.setdefault(phase, now)
    run.was_ready = run.was_ready or phase == Phase.READY
    return became_ready


def _logged_end(timeline: Timeline) -> float | None:
    """When a run whose process is not seen alive ended, by its log: the time of its last
    line (dated by its stamp when the watch attached late). Read long after a crash, the
    run ends there, not at the moment of reading."""
    process, log = timeline.seen.process, timeline.log
    if (process is not None and process.alive) or log is None:
        return None
    return log.last_line_at


def aged_flags(run: Incarnation, raised: list[Raised], now: float) -> tuple[Flag, ...]:
    """``raised`` as flags with their age (since when each has been up in this run)."""
    since = {r.name: run.flag_since.get(r.name, now) for r in raised}
    run.flag_since = since
    return tuple(
        Flag(r.name, r.evidence, now - since[r.name], r.next_step, r.cause) for r in raised
    )

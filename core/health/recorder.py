"""Start-up history for one watch: what to expect (from earlier start-ups of the same
signature) and, once, how this start-up ended.

An incarnation is recorded when it becomes ready, or when it crashes or is stopped before
that; one that ends otherwise is closed with its real outcome when the next begins. Only a
start-up whose beginning was seen is recorded (an attach to a running server would teach a
window that is too short).
"""

from __future__ import annotations

from msgspec import UNSET

from eagle_tui.core.health.history import (
    Expectations,
    StartupHistory,
    StartupRecord,
    expectations_from,
)
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import Outcome, Verdict
from eagle_tui.core.health.timeline import Timeline


class StartupRecorder:
    """Reads expectations from ``history`` and appends this watch's start-ups to it (when
    ``history`` is None, nothing is read or written). ``recorded``: the last record."""

    def __init__(self, history: StartupHistory | None) -> None:
        self._history = history
        self._expect_cache: tuple[str | None, Expectations] | None = None
        self.recorded: StartupRecord | None = None
        self.server_timings: dict[str, float] = {}
        """SGLang's figures from ``/server_info`` (the log's line wins when both exist)."""

    @property
    def keeps_history(self) -> bool:
        """True when start-ups are read from and written to a history file."""
        return self._history is not None

    @property
    def problem(self) -> str | None:
        """Why the history file could not be read or written, if it could not."""
        return self._history.problem if self._history is not None else None

    def expectations(self, signature: str | None, settings: WatchSettings) -> Expectations:
        """What to expect of a start-up of ``signature`` (kept until the signature changes)."""
        if self._expect_cache is None or self._expect_cache[0] != signature:
            if self._history is not None:
                found = self._history.expectations(signature, settings)
            else:
                found = expectations_from([], settings)
            self._expect_cache = (signature, found)
        return self._expect_cache[1]

    def close(self, timeline: Timeline, signature: str | None) -> None:
        """Close the incarnation in history with its outcome so far (once)."""
        run = timeline.run
        if run.closed:
            return
        run.closed = True
        outcome = run.outcome()
        if outcome in (Outcome.READY.value, "unknown") and run.was_ready:
            return  # recorded when it became ready
        if outcome != "unknown":
            self._record(timeline, signature, outcome, run.ended_at or timeline.seen.now)

    def on_tick(self, timeline: Timeline, signature: str | None, phase: Phase,
                verdict: Verdict | None, now: float) -> None:
        """Record the start-up the moment it is ready, crashed or stopped."""
        run = timeline.run
        if run.closed:
            return
        if phase == Phase.READY:
            run.closed = True
            self._record(timeline, signature, Outcome.READY.value, run.ready_at or now)
        elif verdict is not None and verdict.outcome in (Outcome.CRASHED, Outcome.STOPPED):
            run.closed = True
            if run.was_ready:
                return  # the start-up itself was recorded when it became ready
            self._record(timeline, signature, verdict.outcome.value, run.ended_at or now)

    def _record(self, timeline: Timeline, signature: str | None, outcome: str,
                end: float) -> None:
        if self._history is None or signature is None or not timeline.beginning_seen():
            return
        anchor, how = timeline.anchor()
        durations = {p.value: d for p, d in timeline.durations(end)}
        if how == "log":
            durations.pop(Phase.LAUNCHING.value, None)  # process start is unknown
        log = timeline.log
        gaps = {p.value: g for p, g in log.max_gap.items()} if log else {}
        step_gaps = {s.value: g for s, g in log.max_step_gap.items()} if log else {}
        wall_end = timeline.seen.wall - (timeline.seen.now - end)
        record = StartupRecord(
            signature, wall_end, end - anchor, durations, gaps, outcome, step_gaps,
            server_timings=(log.engine_timings if log and log.engine_timings
                            else self.server_timings) or UNSET,
        )
        self._history.append(record)
        self.recorded = record

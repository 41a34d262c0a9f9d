"""What the log says about a failure: fatal lines, tracebacks and their exception lines.

A traceback is quoted by its last line (``ValueError: …``), which arrives after every frame,
so the evidence is only complete once the log goes quiet; ``settled`` says when. A bare
traceback during start-up (no fatal line names it) is a failure too once it has settled,
unless the start-up moves on after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from eagle_tui.core.serverlog import events as ev

# After a deliberate stop, these are the stop itself: children ending on SIGTERM (-15),
# SIGINT (-2) or being killed (-9), and the SIGQUIT the launcher raises when they do.
_STOP_ECHOES = frozenset({"subprocess_crashed", "child_failed", "child_exited", "rank_died"})
_STOP_CODES = frozenset({-15, -2, -9, 0, 9, 15, 130, 137, 143})


@dataclass(frozen=True)
class TimedFatal:
    """A fatal line and when it arrived."""

    event: ev.Fatal
    at: float


_EXCEPTION_SHAPED = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception): ")


def _merged(first: TimedFatal, again: ev.Fatal) -> TimedFatal:
    """One line per kind: the first, unless a later one is the exception line a person would
    quote (``RuntimeError: HIP error: …`` over a bare ``HIP error: …``); exit codes kept."""
    line = first.event.line
    if not _EXCEPTION_SHAPED.match(line.message) and _EXCEPTION_SHAPED.match(again.line.message):
        line = again.line
    code = first.event.exit_code if first.event.exit_code is not None else again.exit_code
    kept = ev.Fatal(line, first.event.kind, code, first.event.opens_traceback)
    return TimedFatal(kept, first.at)


class CrashLog:
    """Fatal lines (one per kind, the first), tracebacks and exception lines."""

    def __init__(self) -> None:
        self.fatals: list[TimedFatal] = []
        self.exception_line: str | None = None
        self.exception_at: float | None = None
        self.traceback_open = False
        self.traceback_at: float | None = None
        self.last_error: ev.ErrorLine | None = None
        self.bare_exception = False  # a traceback no fatal line explains
        self.stop_echoes: list[ev.Fatal] = []

    def note(self, event: ev.LogEvent, at: float, *, stopping: bool) -> None:
        """Fold one event (``stopping``: a deliberate stop is under way)."""
        match event:
            case ev.Fatal():
                self._fatal(event, at, stopping=stopping)
            case ev.TracebackStart():
                self.traceback_open, self.traceback_at = True, at
                self.bare_exception = self.bare_exception or not self.fatals
            case ev.ExceptionLine(line=line):
                self.exception_line, self.exception_at = line.text, at
                self.traceback_open = False
            case ev.ErrorLine():
                self.last_error = event

    def _fatal(self, event: ev.Fatal, at: float, *, stopping: bool) -> None:
        if self._is_stop_echo(event, stopping):
            self.stop_echoes.append(event)
            return
        if event.opens_traceback:
            self.traceback_open, self.traceback_at = True, at
        if _EXCEPTION_SHAPED.match(event.line.message):  # the traceback's own last line
            self.exception_line, self.exception_at = event.line.text, at
            self.traceback_open = False
        for index, timed in enumerate(self.fatals):
            if timed.event.kind == event.kind:
                self.fatals[index] = _merged(timed, event)
                return
        self.fatals.append(TimedFatal(event, at))
        self.bare_exception = False

    @staticmethod
    def _is_stop_echo(event: ev.Fatal, stopping: bool) -> bool:
        if event.kind not in _STOP_ECHOES:
            return False
        if event.exit_code is not None and event.exit_code in (-15, -2):
            return True  # a rank ended by SIGTERM/SIGINT: someone is stopping the server
        return stopping and (event.exit_code is None or event.exit_code in _STOP_CODES)

    def progressed(self) -> None:
        """The start-up moved on: an earlier bare traceback was not fatal."""
        self.bare_exception = False

    @property
    def failed(self) -> bool:
        """A fatal line, or a bare traceback that ended in an exception line."""
        return bool(self.fatals) or (self.bare_exception and self.exception_line is not None)

    def settled(self, last_line_at: float | None, now: float, quiet_s: float) -> bool:
        """True once the log has been quiet for ``quiet_s`` (the traceback is complete)."""
        return last_line_at is None or now - last_line_at >= quiet_s

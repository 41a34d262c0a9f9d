"""The accept length from the decode log's ``accept len:`` lines (no metrics needed).

SGLang 0.5.23 writes, every ``--decode-log-interval`` decode iterations (default 40), on rank 0:
``Decode batch, #running-req: 1, #token: 20, token usage: 0.00, accept len: 4.00, accept rate:
1.00, cpu graph: False, gen throughput (token/s): 26.39, #queue-req: 0``. ``accept len`` is
accepted tokens / verify steps since the previous line (the bonus token counted, the prefill
token not, unlike ``meta_info``'s figure); ``accept rate`` accepted / proposed drafts. The line
does not say how many verify steps it covers: each covers the same number of iterations, with
``#running-req`` requests verified per iteration when it was written, so lines are weighted by
that count (exact when the batch held steady over the interval).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

import msgspec

from eagle_tui.core.accept.figures import AcceptFigure, window_text
from eagle_tui.core.serverlog.events import BatchStats
from eagle_tui.core.serverlog.parser import parse_lines

DAY_S = 86_400.0


class LogAcceptPoint(msgspec.Struct, frozen=True):
    """One decode line's acceptance at ``at_s`` seconds (the caller's clock)."""

    at_s: float
    accept_length: float
    accept_rate: float | None
    running: int


def log_point(event: object, at_s: float) -> LogAcceptPoint | None:
    """The point of a parsed log event; None unless it is a decode line with ``accept len``."""
    if not isinstance(event, BatchStats) or event.kind != "decode":
        return None
    if event.accept_length is None:
        return None
    return LogAcceptPoint(at_s, event.accept_length, event.accept_rate, max(event.running, 1))


def points_from_log(lines: Iterable[str]) -> list[LogAcceptPoint]:
    """The points of a written log, timed by each line's stamp (seconds of the day, carried
    past midnight); a line without a stamp takes the time of the one before it."""
    points: list[LogAcceptPoint] = []
    at_s, day = 0.0, 0.0
    for event in parse_lines(list(lines)):
        stamp = getattr(getattr(event, "line", None), "stamp", None)
        if stamp is not None:
            of_day = stamp.hour * 3600 + stamp.minute * 60 + stamp.second
            if of_day + day < at_s - DAY_S / 2:
                day += DAY_S
            at_s = of_day + day
        point = log_point(event, at_s)
        if point is not None:
            points.append(point)
    return points


def log_figure(points: Sequence[LogAcceptPoint]) -> AcceptFigure | None:
    """The lines' accept length weighted by their ``#running-req``; None without a line."""
    if not points:
        return None
    weight = sum(p.running for p in points)
    length = sum(p.accept_length * p.running for p in points) / weight
    rates = [p for p in points if p.accept_rate is not None]
    rate = (sum((p.accept_rate or 0.0) * p.running for p in rates) / sum(p.running for p in rates)
            if rates else None)
    span = points[-1].at_s - points[0].at_s
    return AcceptFigure(
        accept_length=length,
        source="decode_log",
        window=window_text(round(span)) if len(points) > 1 else "one log interval",
        window_s=span if len(points) > 1 else None,
        accept_rate=rate,
        basis=f"{len(points)} decode line{'s' if len(points) != 1 else ''}",
    )


class DecodeLogWindow:
    """Decode-log points kept over a sliding window (``add`` each, ask ``figure()``)."""

    def __init__(self, window_s: float) -> None:
        if window_s <= 0:
            raise ValueError(f"a log window must be positive, not {window_s}")
        self.window_s = window_s
        self._points: deque[LogAcceptPoint] = deque()

    def add(self, point: LogAcceptPoint) -> None:
        """Keep a point and drop those older than the window before it."""
        self._points.append(point)
        while self._points and self._points[0].at_s < point.at_s - self.window_s:
            self._points.popleft()

    def figure(self) -> AcceptFigure | None:
        """:func:`log_figure` over the points in the window."""
        return log_figure(list(self._points))


__all__ = ["DecodeLogWindow", "LogAcceptPoint", "log_figure", "log_point", "points_from_log"]

"""Date log lines by their own timestamps, so times are true when a watch attaches late.

A line's stamp is on the *log's* clock, which may differ from ours (a container in UTC,
a remote node, a replay): ``offset`` is our wall time minus the log's. It is learned on
the first read of an existing file, from its modification time: the newest stamp was
written no later than that. When the two are close (or the stamp trails by less than ten
minutes of unstamped output such as progress bars) the clocks are taken to agree; a gap
within 14 h and near a whole number of quarter-hours is a time zone; anything else is a
skew to trust (a log copied from elsewhere, a replay).

Stamps without a date (``[14:39:07 TP3]``) or a year (vLLM's ``08-14 20:27:09``) take the
day nearest the reference time that is not in its future.
"""

from __future__ import annotations

import calendar
import datetime as dt

from eagle_tui.core.serverlog.prefix import Stamp

_SAME_CLOCK_TRAIL_S = 600.0  # unstamped output (bars, tracebacks) after the newest stamp
_FUTURE_SLACK_S = 5.0
_ZONE_STEP_S = 900.0
_ZONE_TOLERANCE_S = 120.0
_ZONE_MAX_S = 14 * 3600.0  # UTC-12 to UTC+14: a larger gap is a skew, not a time zone


def _epoch(value: dt.datetime, utc: bool) -> float:
    if utc:
        return calendar.timegm(value.timetuple()) + value.microsecond / 1e6
    return value.timestamp()  # naive: the local zone, as SGLang's logging writes it


def stamp_epoch(stamp: Stamp, reference: float) -> float | None:
    """Seconds since the epoch on the log's clock; ``reference`` fills a missing date."""
    whole = int(stamp.second)
    micro = round((stamp.second - whole) * 1e6)
    ref = dt.datetime.fromtimestamp(reference)
    try:
        if stamp.year is not None and stamp.month is not None and stamp.day is not None:
            day = dt.date(stamp.year, stamp.month, stamp.day)
            value = dt.datetime.combine(day, dt.time(stamp.hour, stamp.minute, whole, micro))
            return _epoch(value, stamp.utc)
        if stamp.month is not None and stamp.day is not None:
            value = dt.datetime(ref.year, stamp.month, stamp.day, stamp.hour, stamp.minute, whole)
            if value > ref + dt.timedelta(days=1):
                value = value.replace(year=ref.year - 1)
            return _epoch(value, stamp.utc) + micro / 1e6
        value = dt.datetime.combine(ref.date(), dt.time(stamp.hour, stamp.minute, whole, micro))
        if value > ref + dt.timedelta(hours=1):
            value -= dt.timedelta(days=1)
        return _epoch(value, stamp.utc)
    except (ValueError, OverflowError, OSError):
        return None


class LogClock:
    """The offset between the log's clock and ours, learned as lines arrive."""

    def __init__(self) -> None:
        self.offset: float | None = None
        self.how = "unknown"

    def log_time(self, wall: float) -> float:
        """Our wall time ``wall`` on the log's clock (for stamps without a date)."""
        return wall - (self.offset or 0.0)

    def to_wall(self, log_epoch: float) -> float:
        """A log-clock time on our wall clock."""
        return log_epoch + (self.offset or 0.0)

    def learn_backlog(self, newest_epoch: float, mtime: float) -> None:
        """The first read of a file: its newest stamp was written by ``mtime``."""
        if self.offset is not None:
            return
        gap = mtime - newest_epoch
        if -_FUTURE_SLACK_S <= gap <= _SAME_CLOCK_TRAIL_S:
            self.offset, self.how = 0.0, "same clock"
            return
        zone = round(gap / _ZONE_STEP_S) * _ZONE_STEP_S
        if zone and abs(zone) <= _ZONE_MAX_S and abs(gap - zone) <= _ZONE_TOLERANCE_S:
            self.offset, self.how = zone, f"time zone {zone / 3600:+.2f} h"
        else:
            self.offset, self.how = gap, "file modification time"

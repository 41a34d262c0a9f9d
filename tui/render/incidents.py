"""New server flags grouped into incidents: one toast per incident, naming its root cause.

A crash raises several flags over a tick or two (the fatal log line, the process exit, a
rank gone, the port closed). ``IncidentDesk`` collects the flags new in a short hold, then
says what one toast should show: the first fatal log line when there is one (the root
cause), else the most serious flag; later flags of the same incident within ``window_s``
toast again only when they are more serious than what was shown (a warning, then a crash).
Pure: the caller passes the time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eagle_tui.tui.render.flags import flag_severity

if TYPE_CHECKING:
    from eagle_tui.core.health.snapshot import Flag

HOLD_S = 1.5
"""How long new flags are gathered before the incident's toast: a fatal line often lands
a tick after the process exit it explains."""
WINDOW_S = 60.0
_RANK = {"info": 0, "warning": 1, "error": 2}


@dataclass(frozen=True)
class Toast:
    """What one toast says."""

    title: str
    message: str
    severity: str


@dataclass
class Incident:
    """Flags raised close together on one server."""

    opened: float
    flags: list[Flag] = field(default_factory=list)
    shown_rank: int = -1
    last: float = 0.0


def root_cause(flags: Sequence[Flag]) -> Flag:
    """The first fatal log line's flag, else the most serious flag (flags come most
    serious first)."""
    return next((f for f in flags if f.name.startswith("fatal")), flags[0])


def worst_rank(flags: Sequence[Flag]) -> int:
    return max(_RANK[flag_severity(f.name)] for f in flags)


class IncidentDesk:
    """One server's incidents."""

    def __init__(self, label: str, *, hold_s: float = HOLD_S, window_s: float = WINDOW_S):
        self.label = label
        self.hold_s = hold_s
        self.window_s = window_s
        self.incident: Incident | None = None

    def add(self, flags: Sequence[Flag], now: float) -> None:
        """Note flags that are new in a snapshot."""
        if not flags:
            return
        incident = self.incident
        if incident is None or now - incident.last > self.window_s:
            incident = self.incident = Incident(opened=now)
        incident.flags.extend(f for f in flags if f.name not in {g.name for g in incident.flags})
        incident.last = now

    def due(self, now: float) -> Toast | None:
        """The toast to show now, if any (at most one per incident, unless it worsens)."""
        incident = self.incident
        if incident is None or not incident.flags or now - incident.opened < self.hold_s:
            return None
        rank = worst_rank(incident.flags)
        if rank <= incident.shown_rank:
            return None
        incident.shown_rank = rank
        root = root_cause(incident.flags)
        others = len(incident.flags) - 1
        more = f" (+{others} more on the card)" if others else ""
        severity = "error" if rank == _RANK["error"] else "warning"
        name = root.name
        if root.cause and root.cause != root.name:
            name += f" ({root.cause})"
        return Toast(f"{self.label}: {name}{more}", root.evidence, severity)

"""Turn a tick's phase and flags into a verdict a watch can stop on.

Crashed (with the most specific fatal line, or the silent exit), port conflict (a fatal
address-in-use, or a foreign holder that outlasted the grace period), stopped (SIGTERM),
stalled, ready. ``timeout`` is decided by whoever set the deadline.
"""

from __future__ import annotations

from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import Flag, Outcome, Verdict
from eagle_tui.core.text import duration

_PORT_FATALS = ("fatal:address_in_use", "fatal:port_in_use")


def judge(
    phase: Phase,
    flags: tuple[Flag, ...],
    settings: WatchSettings,
    *,
    stop_evidence: str | None = None,
    ready_evidence: str = "",
) -> Verdict | None:
    """The verdict for this tick, or None while the outcome is still open."""
    by_name = {f.name: f for f in flags}
    if phase == Phase.CRASHED:
        return _crashed(flags, by_name)
    if phase in (Phase.STOPPING, Phase.DOWN) and stop_evidence is not None:
        return Verdict(Outcome.STOPPED, f"server is shutting down: {stop_evidence}")
    conflict = by_name.get("port_conflict")
    if conflict is not None and conflict.since_s >= settings.port_conflict_grace_s:
        held = f" (for {duration(conflict.since_s)})" if conflict.since_s >= 1 else ""
        return Verdict(Outcome.PORT_CONFLICT, f"port conflict{held}: {conflict.evidence}")
    stalled = by_name.get("stalled")
    if stalled is not None:
        return Verdict(Outcome.STALLED, f"stalled: {stalled.evidence}")
    if phase == Phase.READY:
        return Verdict(Outcome.READY, f"ready{': ' + ready_evidence if ready_evidence else ''}")
    return None


def _crashed(flags: tuple[Flag, ...], by_name: dict[str, Flag]) -> Verdict:
    for name in _PORT_FATALS:
        if name in by_name:
            holder = by_name.get("port_conflict")
            extra = f"; {holder.evidence}" if holder is not None else ""
            kind = name.split(":", 1)[1]
            return Verdict(Outcome.PORT_CONFLICT, f"{kind}: {by_name[name].evidence}{extra}")
    fatal = next((f for f in flags if f.name.startswith("fatal:")), None)
    exited = by_name.get("process_exited")
    if fatal is not None:
        tail = f"; {exited.evidence}" if exited is not None else ""
        return Verdict(Outcome.CRASHED, f"crashed ({fatal.name}): {fatal.evidence}{tail}")
    if exited is not None:
        return Verdict(Outcome.CRASHED, f"crashed (silent exit): {exited.evidence}")
    degraded = by_name.get("degraded")
    evidence = degraded.evidence if degraded is not None else "no further evidence"
    return Verdict(Outcome.CRASHED, f"crashed: the port stopped answering after ready: {evidence}")

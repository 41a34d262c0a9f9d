"""Turn a tick's phase and flags into a verdict a watch can stop on.

Crashed (with the most specific fatal line and the exception that ends its traceback, or
the exception of a bare traceback, or the silent exit), port conflict (a fatal
address-in-use, or a foreign holder that outlasted the grace period), stopped (SIGTERM,
Ctrl-C, ranks ending with -15), stalled, ready. ``timeout`` is decided by whoever set the
deadline. A crash is only judged once its evidence is complete (``settled``: the log went
quiet or the process is gone), so the diagnosis quotes the exception, not the first frame.
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
    settled: bool = True,
    reached: Phase | None = None,
) -> Verdict | None:
    """The verdict for this tick, or None while the outcome is still open."""
    by_name = {f.name: f for f in flags}
    if phase == Phase.CRASHED:
        return _crashed(flags, by_name, reached) if settled else None
    if phase in (Phase.STOPPING, Phase.DOWN) and stop_evidence is not None:
        return Verdict(Outcome.STOPPED, f"server is shutting down: {stop_evidence}")
    conflict = by_name.get("port_conflict")
    if conflict is not None and conflict.since_s >= settings.port_conflict_grace_s:
        held = f" (for {duration(conflict.since_s)})" if conflict.since_s >= 1 else ""
        return Verdict(
            Outcome.PORT_CONFLICT, f"port conflict{held}: {conflict.evidence}", conflict.next_step
        )
    stalled = by_name.get("stalled")
    if stalled is not None:
        head = stalled.cause or "stalled"
        return Verdict(
            Outcome.STALLED, f"{head}: {stalled.evidence}", stalled.next_step, stalled.cause
        )
    if phase == Phase.READY:
        return Verdict(Outcome.READY, f"ready{': ' + ready_evidence if ready_evidence else ''}")
    return None


def _crashed(flags: tuple[Flag, ...], by_name: dict[str, Flag], reached: Phase | None) -> Verdict:
    where = f" in {reached}" if reached is not None and reached != Phase.READY else ""
    if reached == Phase.READY:
        where = " after ready"
    for name in _PORT_FATALS:
        if name in by_name:
            holder = by_name.get("port_conflict")
            extra = f"; {holder.evidence}" if holder is not None else ""
            kind = name.split(":", 1)[1]
            step = holder.next_step if holder is not None else by_name[name].next_step
            return Verdict(Outcome.PORT_CONFLICT, f"{kind}: {by_name[name].evidence}{extra}", step)
    fatal = next((f for f in flags if f.name.startswith("fatal:")), None)
    fatal = fatal or by_name.get("exception")
    exited = by_name.get("process_exited")
    if fatal is not None:
        tail = f"; {exited.evidence}" if exited is not None else ""
        text = f"crashed{where} ({fatal.name}): {fatal.evidence}{tail}"
        return Verdict(Outcome.CRASHED, text, fatal.next_step)
    if exited is not None:
        silent = "no fatal line in the log" in exited.evidence or "no log" in exited.evidence
        label = "silent exit" if silent else "exit"
        return Verdict(
            Outcome.CRASHED, f"crashed{where} ({label}): {exited.evidence}", exited.next_step
        )
    degraded = by_name.get("degraded")
    evidence = degraded.evidence if degraded is not None else "no further evidence"
    step = degraded.next_step if degraded is not None else ""
    return Verdict(
        Outcome.CRASHED, f"crashed: the port stopped answering after ready: {evidence}", step
    )

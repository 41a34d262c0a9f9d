"""The snapshot of one tick, built by a pure function: ``build_snapshot(TickState)``.

``WatchState`` folds the observations and decides (phase, flags, verdict); what it then
knows is a ``TickState``, and the ``HealthSnapshot`` follows from that alone: nothing here
changes the state or reads a clock, so a snapshot can be rebuilt from the same state.
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle_tui.core.health.context import TickContext
from eagle_tui.core.health.load import log_load
from eagle_tui.core.health.observed import Observation
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.snapshot import (
    Flag,
    HealthSnapshot,
    ServingLoad,
    StartupProgress,
    Verdict,
)
from eagle_tui.core.health.timeline import Timeline


@dataclass(frozen=True)
class TickState:
    """Everything one tick knows once it has decided. ``problems`` are the tick's (the
    sources', the log's, the history file's); ``keeps_history``: start-ups are recorded."""

    obs: Observation
    timeline: Timeline
    ctx: TickContext
    phase: Phase
    flags: tuple[Flag, ...]
    verdict: Verdict | None
    signature: str | None
    problems: tuple[str, ...]
    keeps_history: bool
    wants_stacks: bool = False
    busy: Flag | None = None


def build_snapshot(state: TickState) -> HealthSnapshot:
    """The immutable snapshot of ``state``."""
    obs, timeline, log = state.obs, state.timeline, state.timeline.log
    run, seen = timeline.run, timeline.seen
    expectation = state.ctx.expectations.expectation
    elapsed = timeline.elapsed()
    return HealthSnapshot(
        at=obs.wall,
        phase=state.phase,
        phase_s=timeline.phase_seconds(state.phase, obs.now),
        elapsed_s=elapsed,
        expected=expectation,
        window_fraction=elapsed / expectation.window_s if expectation.window_s > 0 else None,
        flags=state.flags,
        verdict=state.verdict,
        last_log_line=log.said_line if log else None,  # our own polls say nothing
        last_log_age_s=obs.now - log.said_at if log and log.said_at is not None else None,
        progress=log.progress if log else StartupProgress(),
        load=serving_load(state),
        ranks=tuple(sorted(log.ranks.phases().items())) if log else (),
        phase_durations=timeline.durations(obs.now),
        process=seen.process,
        port=seen.port,
        health=seen.health.latest,
        gpu=obs.gpu,
        signature=state.signature,
        problems=state.problems,
        notes=notes(state),
        reached=run.reached,
        step=log.step.value if log and log.step else None,
        ready_after_s=run.ready_after,
        lagging_ranks=state.ctx.lagging,
        unknown_lines=log.unknown if log else 0,
        unknown_samples=tuple(log.unknown_lines) if log else (),
        incarnation=run.number,
        evidence=obs.evidence,
        stacks=obs.stacks,
        wants_stacks=state.wants_stacks,
        orphans=state.ctx.orphans,
        busy=state.busy,
    )


def serving_load(state: TickState) -> ServingLoad | None:
    """The load the log's last batch line reported, with when it was true; expired after
    a few decode-log intervals, and never load at all while the server is not serving."""
    log = state.timeline.log
    if log is None:
        return None
    return log_load(log, state.phase, state.obs.now, state.obs.wall, state.ctx.settings)


def notes(state: TickState) -> tuple[str, ...]:
    """What the snapshot cannot see, and how its times were found."""
    timeline, log, gpu = state.timeline, state.timeline.log, state.obs.gpu
    found = []
    if log is None:
        found.append("log not found: the phase before the port opens and the start-up's times "
                     "are not visible; pass --log FILE (the file the server's stdout/stderr go "
                     "to, or its --log-file)")
    if not state.ctx.has_process:
        found.append("no process access: a crash is inferred from the port alone")
    if timeline.anchor()[1] == "watch":
        found.append("elapsed time counts from when the watch began")
    if log is not None and log.clock.offset is not None:
        found.append(f"earlier lines dated by their own timestamps ({log.clock.how})")
    if not timeline.beginning_seen() and state.keeps_history:
        found.append("attached after this start-up began: it is not recorded in history")
    if gpu is not None and not gpu.available:
        found.append(gpu.reason)
    return tuple(found)

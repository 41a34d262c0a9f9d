"""Is the start-up stalled? The silence since the log's last line against the limit of the
step the log is at (``core.health.steps``), with where that limit comes from."""

from __future__ import annotations

from dataclasses import dataclass

from eagle_tui.core.health.history import Expectations
from eagle_tui.core.health.logtrack import LogTracker
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.steps import STEP_PHASE, STEP_WHAT, Step
from eagle_tui.core.text import duration

# The step a phase starts with, when the phase comes from /health rather than the log.
_FIRST_STEP = {
    Phase.LAUNCHING: Step.LAUNCHING,
    Phase.DISTRIBUTED_INIT: Step.DIST_BEGIN,
    Phase.LOADING_WEIGHTS: Step.WEIGHTS_BEGIN,
    Phase.ALLOCATING_KV: Step.KV,
    Phase.CAPTURING_GRAPHS: Step.GRAPHS_BEGIN,
    Phase.WARMING_UP: Step.WARMUP,
}
_BARS = {Step.WEIGHTS_BAR: ("weights", "shard"), Step.GRAPHS_BAR: ("graphs", "capture")}


@dataclass(frozen=True)
class StallLimit:
    """How long the current step may stay silent, and why that long."""

    step: Step
    seconds: float
    source: str


def current_step(log: LogTracker, phase: Phase) -> Step:
    """The step that applies: the log's, unless another source put the phase further."""
    if log.step is not None and STEP_PHASE[log.step] == phase:
        return log.step
    return _FIRST_STEP.get(phase, Step.LAUNCHING)


def stall_limit(
    log: LogTracker, phase: Phase, settings: WatchSettings, expectations: Expectations
) -> StallLimit:
    """The limit of the step the start-up is at: set, learned, paced by a bar, or default."""
    step = current_step(log, phase)
    if phase in settings.stall_limits_s:
        return StallLimit(step, settings.stall_limits_s[phase], "set with --stall")
    if step in expectations.step_limits:
        return StallLimit(step, expectations.step_limits[step], expectations.step_sources[step])
    if expectations.stall_sources.get(phase, "default") != "default":
        return StallLimit(step, expectations.stall_limits[phase], expectations.stall_sources[phase])
    default = settings.step_limit(step)
    paced = _bar_limit(log, step, settings, default)
    if paced is not None:
        return paced
    return StallLimit(step, default, f"default while {STEP_WHAT[step]}")


def _bar_limit(
    log: LogTracker, step: Step, settings: WatchSettings, floor: float
) -> StallLimit | None:
    if step not in _BARS:
        return None
    key, noun = _BARS[step]
    bar = log.bars.get(key)
    limit = bar.limit(settings.bar_margin, floor) if bar is not None else None
    if bar is None or limit is None:
        return None
    pace = max(bar.longest_gap_s, bar.rate_s or 0.0)
    source = (
        f"{settings.bar_margin:g} x the slowest {noun} step so far ({duration(pace)}), "
        f"at least {duration(floor)}"
    )
    return StallLimit(step, limit, source)


def silence(log: LogTracker, watch_started: float, now: float) -> float:
    """Seconds since the log's last line (since the watch began, before any line)."""
    since = log.last_progress_at if log.last_progress_at is not None else watch_started
    return max(0.0, now - since)

"""The phases a server goes through, as the watcher names them."""

from __future__ import annotations

from enum import StrEnum

from eagle_tui.core.text import duration


class Phase(StrEnum):
    """Where a server is. Start-up phases are listed in the order they happen."""

    DOWN = "down"
    LAUNCHING = "launching"
    DISTRIBUTED_INIT = "distributed_init"
    LOADING_WEIGHTS = "loading_weights"
    ALLOCATING_KV = "allocating_kv"
    CAPTURING_GRAPHS = "capturing_graphs"
    WARMING_UP = "warming_up"
    READY = "ready"
    DEGRADED = "degraded"
    STOPPING = "stopping"
    CRASHED = "crashed"
    UNREACHABLE = "unreachable"


STARTUP_PHASES: tuple[Phase, ...] = (
    Phase.LAUNCHING,
    Phase.DISTRIBUTED_INIT,
    Phase.LOADING_WEIGHTS,
    Phase.ALLOCATING_KV,
    Phase.CAPTURING_GRAPHS,
    Phase.WARMING_UP,
)

_ORDER = {phase: index for index, phase in enumerate((*STARTUP_PHASES, Phase.READY))}


def startup_rank(phase: Phase) -> int:
    """Position in the start-up order (launching = 0 … ready = 6); -1 for other phases."""
    return _ORDER.get(phase, -1)


def later(a: Phase | None, b: Phase) -> Phase:
    """The further along of two start-up phases (``a`` may be ``None``)."""
    if a is None or startup_rank(b) > startup_rank(a):
        return b
    return a


def is_starting(phase: Phase) -> bool:
    """True for the phases between launch and ready, where stalls are measured."""
    return phase in STARTUP_PHASES


def in_phase(seconds: float | None) -> str:
    """``1m05s in phase``; ``time in phase unknown`` when nothing dates the phase's start."""
    return "time in phase unknown" if seconds is None else f"{duration(seconds)} in phase"

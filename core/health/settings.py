"""Tunable limits of the watcher, with defaults that suit a large multi-GPU start-up."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from eagle_tui.core.health.phase import Phase

# How long a start-up phase may go without a new log line before it counts as stalled,
# when no history says better. Weight loading prints a bar update per shard and graph
# capture one per batch size, so minutes of silence there mean a hang (sglang#3547,
# #4007, #4417: logs stop after "Capture cuda graph begin").
DEFAULT_STALL_LIMITS_S: Mapping[Phase, float] = MappingProxyType(
    {
        Phase.LAUNCHING: 300.0,
        Phase.LOADING_WEIGHTS: 300.0,
        Phase.ALLOCATING_KV: 180.0,
        Phase.CAPTURING_GRAPHS: 300.0,
        Phase.WARMING_UP: 180.0,
    }
)


@dataclass(frozen=True)
class WatchSettings:
    """Everything the watcher's judgement depends on.

    ``default_window_s`` is the expected start-up time with no history; history replaces it
    with the slowest recent start-up times ``window_margin``. Stall limits come from the
    longest silence seen per phase in history times ``stall_margin`` (never below
    ``min_stall_s``), else from ``stall_limits_s``.
    """

    poll_interval_s: float = 1.0
    health_timeout_s: float = 3.0
    default_window_s: float = 600.0
    window_margin: float = 1.25
    stall_limits_s: Mapping[Phase, float] = field(default_factory=lambda: DEFAULT_STALL_LIMITS_S)
    stall_margin: float = 3.0
    min_stall_s: float = 30.0
    slow_health_s: float = 2.5
    degraded_after_failures: int = 2
    crashed_after_refusals: int = 3
    port_conflict_grace_s: float = 15.0
    gpu_interval_s: float = 5.0
    gpu_held_min_bytes: int = 1 << 30
    history_size: int = 10

    def stall_limit(self, phase: Phase) -> float:
        """The default stall limit of a start-up phase."""
        return self.stall_limits_s.get(phase, max(self.stall_limits_s.values(), default=300.0))

"""Tunable limits of the watcher, with defaults that suit a large multi-GPU start-up."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.steps import DEFAULT_STEP_LIMITS_S, STEP_PHASE, Step


@dataclass(frozen=True)
class WatchSettings:
    """Everything the watcher's judgement depends on.

    ``default_window_s`` is the expected start-up time with no history; history replaces it
    with the slowest recent start-up times ``window_margin``. A silence is a stall when it
    outlasts the limit of the step the log is at (``core.health.steps``): learned from
    history (the longest silence there times ``stall_margin``, never below ``min_stall_s``),
    else ``bar_margin`` times the slowest step of a moving progress bar, else
    ``step_limits_s``. ``stall_limits_s`` sets a phase's limit outright (``--stall``).
    A crash verdict waits until the log has been quiet ``crash_settle_s`` (the traceback is
    complete) or the process is gone.

    With the server's processes in view (``core.health.cause``): work they show (a busy
    compiler child, CPU, bytes read) counts as progress; a rank stopped for
    ``stopped_after_s``, or node 0 missing peers / a read blocked on a file for
    ``evidence_after_s`` of log silence, is a stall at once, whatever the step's limit.
    """

    poll_interval_s: float = 1.0
    health_timeout_s: float = 3.0
    default_window_s: float = 600.0
    window_margin: float = 1.25
    stall_limits_s: Mapping[Phase, float] = field(default_factory=dict)
    step_limits_s: Mapping[Step, float] = field(default_factory=lambda: DEFAULT_STEP_LIMITS_S)
    stall_margin: float = 3.0
    bar_margin: float = 3.0
    min_stall_s: float = 30.0
    crash_settle_s: float = 5.0
    slow_health_s: float = 2.5
    degraded_after_failures: int = 2
    crashed_after_refusals: int = 3
    port_conflict_grace_s: float = 15.0
    gpu_interval_s: float = 5.0
    gpu_held_min_bytes: int = 1 << 30
    history_size: int = 10
    evidence_after_s: float = 45.0
    stopped_after_s: float = 10.0
    load_intervals: float = 3.0
    """A load figure from a batch log line expires after this many decode-log intervals
    (the typical gap between two ``Decode batch`` lines while serving)."""
    load_floor_s: float = 10.0
    """…and never sooner than this (a line a second while busy is normal)."""
    decode_interval_s: float = 10.0
    """The decode-log interval assumed before two lines were seen."""

    def stall_limit(self, phase: Phase) -> float:
        """A phase's limit when nothing finer is known: set outright, else its longest step's."""
        if phase in self.stall_limits_s:
            return self.stall_limits_s[phase]
        steps = [s for s, p in STEP_PHASE.items() if p == phase and s in self.step_limits_s]
        return max((self.step_limits_s[s] for s in steps), default=300.0)

    def step_limit(self, step: Step) -> float:
        """The default limit of one step (its phase's, when set outright)."""
        phase = STEP_PHASE[step]
        if phase in self.stall_limits_s:
            return self.stall_limits_s[phase]
        return self.step_limits_s.get(step, self.stall_limit(phase))

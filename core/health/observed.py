"""What the sources said: one tick's ``Observation``, and ``Observed``, the latest of each
(the process, its port, the run of ``/health`` probes) with the watch's own clocks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from eagle_tui.core.health.context import HealthRun
from eagle_tui.core.health.poller import HealthOutcome, HealthProbe
from eagle_tui.core.proc.evidence import TreeEvidence
from eagle_tui.core.proc.orphans import OrphanReport
from eagle_tui.core.proc.report import GpuReport, PortStatus, ProbeReport, ProcessReport
from eagle_tui.core.proc.stacks import StackReport
from eagle_tui.core.serverlog.follower import LogChunk


@dataclass(frozen=True)
class Observation:
    """What the sources said at one tick. ``None`` means "no such source" (or no news).

    ``evidence`` is the server tree's process evidence, ``stacks`` the latest stacks taken,
    ``stacks_possible`` that the watcher can take them (it has the server's PID);
    ``server_timings`` SGLang's own start-up figures from ``/server_info``, when just read;
    ``orphans`` leftover SGLang processes, looked for while the port or GPU memory is in
    question."""

    now: float
    wall: float
    log: LogChunk | None = None
    probe: ProbeReport | None = None
    health: HealthProbe | None = None
    gpu: GpuReport | None = None
    problems: tuple[str, ...] = ()
    evidence: TreeEvidence | None = None
    stacks: StackReport | None = None
    stacks_possible: bool = False
    server_timings: Mapping[str, float] | None = None
    orphans: OrphanReport | None = None


@dataclass
class Observed:
    """The latest word of the process probe and ``/health``, and when the watch began
    (``started``) and stands (``now``, ``wall``). ``stop_requested``: eagle-tui asked the
    server to stop, so its exit is no crash."""

    process: ProcessReport | None = None
    port: PortStatus | None = None
    health: HealthRun = field(default_factory=HealthRun)
    last_seq: int = -1
    started: float | None = None
    now: float = 0.0
    wall: float = 0.0
    stop_requested: bool = False

    def tick(self, obs: Observation) -> None:
        """Move the clocks to ``obs`` (the first tick also starts the watch)."""
        if self.started is None:
            self.started = obs.now
        self.now, self.wall = obs.now, obs.wall

    def forget_server(self) -> None:
        """A new incarnation: its ``/health`` run and stop request start afresh."""
        self.health = HealthRun()
        self.stop_requested = False

    def mono_of(self, wall_time: float | None) -> float | None:
        """The monotonic time of a wall-clock ``wall_time`` (never after now)."""
        if wall_time is None:
            return None
        return self.now - max(0.0, self.wall - wall_time)

    def absorb_health(self, probe: HealthProbe | None, slow_s: float,
                      problems: list[str]) -> None:
        """Count a new probe into the run (an answer slower than ``slow_s`` fails it)."""
        if probe is None or probe.seq == self.last_seq:
            return
        self.last_seq = probe.seq
        if probe.outcome == HealthOutcome.ERROR:
            problems.append(f"/health: {probe.detail}")
        slow = probe.latency_s is not None and probe.latency_s > slow_s
        run = self.health
        if probe.outcome == HealthOutcome.OK and not slow:
            self.health = HealthRun(latest=probe, ever_ok=True)
            return
        refused = probe.outcome == HealthOutcome.REFUSED
        self.health = HealthRun(
            latest=probe,
            failures=run.failures + 1,
            refusals=run.refusals + 1 if refused else 0,
            failing_since=run.failing_since if run.failing_since is not None else probe.at,
            ever_ok=run.ever_ok or probe.outcome == HealthOutcome.OK,
        )

"""Everything the phase decision and the flags look at, for one tick."""

from __future__ import annotations

from dataclasses import dataclass

from eagle_tui.core.health.cause import CauseReading
from eagle_tui.core.health.history import Expectations
from eagle_tui.core.health.logtrack import LogTracker
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.poller import HealthProbe
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.proc.orphans import OrphanReport
from eagle_tui.core.proc.report import GpuReport, PortStatus, ProcessReport
from eagle_tui.core.proc.stacks import StackReport


@dataclass(frozen=True)
class HealthRun:
    """The recent run of ``/health`` probes: how many failed in a row, since when."""

    latest: HealthProbe | None = None
    failures: int = 0
    refusals: int = 0
    failing_since: float | None = None
    ever_ok: bool = False


@dataclass(frozen=True)
class TickContext:
    """One tick's view. ``log`` is None without a log; ``has_process`` says whether the
    process table is being watched at all (``process`` is None while not found yet).
    ``lagging`` names the ranks behind the others (``behind`` says where each is).
    ``reading`` is what the processes say (``core.health.cause``), ``busy_at`` when they
    last showed work (it counts as progress), ``stacks`` the latest stacks taken."""

    now: float
    settings: WatchSettings
    expectations: Expectations
    log: LogTracker | None
    has_process: bool
    process: ProcessReport | None
    port: PortStatus | None
    health: HealthRun
    gpu: GpuReport | None
    elapsed_s: float | None
    watch_started: float
    was_ready: bool
    stop_requested: bool = False
    lagging: tuple[str, ...] = ()
    behind: tuple[tuple[str, str], ...] = ()
    reading: CauseReading | None = None
    busy_at: float | None = None
    stacks: StackReport | None = None
    orphans: OrphanReport | None = None

    def health_is_ours(self) -> bool:
        """False when ``/health`` answers may come from another process on our port."""
        if self.port is not None and self.port.held_by_server is False:
            return False
        return not self.foreign_answer_suspected()

    def foreign_answer_suspected(self) -> bool:
        """With no port holder known: an answer while the log says weights are loading.

        SGLang keeps its port closed until weights, KV cache and graphs are ready, so an
        HTTP answer during launching, distributed init or loading_weights comes from some
        other server.
        """
        if self.port is not None and self.port.held_by_server is not None:
            return False
        latest = self.health.latest
        if self.log is None or latest is None or not latest.answered:
            return False
        early = (Phase.LAUNCHING, Phase.DISTRIBUTED_INIT, Phase.LOADING_WEIGHTS)
        return self.log.phase in early

    @property
    def stopping(self) -> bool:
        """A deliberate stop is under way: asked for, logged, or echoed by ranks (-15)."""
        if self.stop_requested:
            return True
        if self.process is not None and self.process.exit_code in (-15, -2):
            return True
        log = self.log
        return log is not None and (log.shutdown is not None or bool(log.crash.stop_echoes))

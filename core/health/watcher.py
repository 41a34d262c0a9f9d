"""The watcher loop: read the log, probe the process, poll ``/health``, make snapshots.

Every source is read inside its own ``try``: a malformed line, a garbage ``/health`` body,
a vanished process or an unreadable log becomes a problem in the snapshot, never an
exception out of the loop. The ``/health`` poll runs in the background so a slow server
does not delay reading the log.

With the server's PID known, every tick also samples its process tree
(``core.proc.sampler``; a new PID gets a new sampler), and when a snapshot asks for stacks
(a stall or busy incident, or ``request_stacks``) every rank's Python stack is taken with
py-spy in a worker thread, so the loop never waits on it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from eagle_tui.core.clock import Clock
from eagle_tui.core.health.observed import Observation
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.poller import HealthOutcome, HealthPoller
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import Expectation, HealthSnapshot
from eagle_tui.core.health.state import WatchState
from eagle_tui.core.proc.evidence import TreeEvidence
from eagle_tui.core.proc.launcher import ManagedServer
from eagle_tui.core.proc.orphans import OrphanReport, Watched
from eagle_tui.core.proc.peers import DistInit
from eagle_tui.core.proc.probe import ProcessProbe
from eagle_tui.core.proc.report import GpuReport, ProbeReport
from eagle_tui.core.proc.sampler import EvidenceSampler
from eagle_tui.core.proc.stacks import StackDumper, StackReport, stack_targets, take_stacks
from eagle_tui.core.proc.stop import StopReport, StopTimeouts
from eagle_tui.core.serverlog.follower import LogChunk, LogFollower

GpuReader = Callable[[], GpuReport]
SnapshotCallback = Callable[[HealthSnapshot], None]
SamplerFactory = Callable[[int], EvidenceSampler]
TimingsFetcher = Callable[[], Awaitable[dict[str, float]]]
OrphanFinder = Callable[[Watched, GpuReport | None], OrphanReport]
ORPHANS_EVERY_S = 5.0
ORPHAN_FLAGS = frozenset({
    "port_conflict", "fatal:address_in_use", "fatal:port_in_use", "fatal:oom", "gpu_memory_held",
})  # fmt: skip


@dataclass(frozen=True)
class RestartResult:
    """How a restart went: the stop of the old server and, if it was safe, the new PID."""

    stop: StopReport | None
    started: bool
    pid: int | None
    reason: str = ""


class Watcher:
    """Combines a log follower, a process probe and a ``/health`` poller (each optional)."""

    def __init__(
        self,
        state: WatchState,
        *,
        clock: Clock,
        log: LogFollower | None = None,
        probe: ProcessProbe | None = None,
        poller: HealthPoller | None = None,
        gpu_reader: GpuReader | None = None,
        on_close: Callable[[], Awaitable[None]] | None = None,
        sampler_factory: SamplerFactory | None = None,
        dumper: StackDumper | None = None,
        timings_fetcher: TimingsFetcher | None = None,
        orphan_finder: OrphanFinder | None = None,
    ) -> None:
        self.state = state
        self.clock = clock
        self.log = log
        self.probe = probe
        self.poller = poller
        self._gpu_reader = gpu_reader
        self._gpu: GpuReport | None = None
        self._gpu_due = float("-inf")
        self._on_close = on_close
        self.latest: HealthSnapshot | None = None
        self._sampler: EvidenceSampler | None = None
        self._sampler_factory = sampler_factory
        self._dumper = dumper
        self._stacks: StackReport | None = None
        self._stack_task: asyncio.Task[StackReport] | None = None
        self._timings_fetcher = timings_fetcher
        self._timings_for: int | None = None  # the /health run whose figures were asked for
        self._orphan_finder = orphan_finder
        self._orphans_seen: OrphanReport | None = None
        self._orphans_due = float("-inf")

    @property
    def settings(self) -> WatchSettings:
        """The settings the state judges by."""
        return self.state.settings

    async def tick(self, *, await_health: bool = False) -> HealthSnapshot:
        """One round (see ``_tick``); when it raises a stall or busy incident whose stacks
        were not taken, they are taken now in a worker thread (a fraction of a second per
        rank) and the round is read again, so the verdict quotes them."""
        snapshot = await self._tick(await_health=await_health)
        if snapshot.wants_stacks and snapshot.evidence is not None:
            self._start_stacks(snapshot.evidence)
            await self.wait_stacks()
            snapshot = await self._tick()
        return snapshot

    async def _tick(self, *, await_health: bool = False) -> HealthSnapshot:
        """One round: start a due ``/health`` probe, read the other sources, fold them.

        ``await_health`` probes now (unless a probe is in flight) and waits for the answer
        first: tests use it to make a tick deterministic. The loop does not, so a slow
        server cannot delay reading the log.
        """
        problems: list[str] = []
        if self.poller is not None:
            poller = self.poller
            self._guard(lambda: poller.kick(force=await_health), problems, "/health poll")
            if await_health:
                await poller.wait_idle()
        probe = self._guard(self._probe, problems, "process probe")
        self._collect_stacks(problems)
        server_timings = await self._server_timings(problems)
        orphans = self._guard(lambda: self._orphans(probe), problems, "leftover processes")
        observation = Observation(
            now=self.clock.monotonic(),
            wall=self.clock.wall(),
            log=self._guard(self._read_log, problems, "log"),
            probe=probe,
            health=self.poller.latest if self.poller is not None else None,
            gpu=self._guard(self._read_gpu, problems, "GPU"),
            problems=tuple(problems),
            evidence=self._guard(lambda: self._sample(probe), problems, "process evidence"),
            stacks=self._stacks,
            stacks_possible=self._sampler is not None,
            server_timings=server_timings,
            orphans=orphans,
        )
        snapshot = self._fold(observation)
        self._adopt_logged_pid()
        self.latest = snapshot
        return snapshot

    @property
    def stacks(self) -> StackReport | None:
        """The latest stacks taken (on a stall, or asked for)."""
        return self._stacks

    def request_stacks(self) -> bool:
        """Take every rank's stack now (the Server view's key); False without a process."""
        evidence = self.latest.evidence if self.latest is not None else None
        if evidence is None:
            return False
        self._start_stacks(evidence)
        return True

    async def _server_timings(self, problems: list[str]) -> dict[str, float] | None:
        """SGLang's own start-up figures (``/server_info`` ``startup_time``), asked once when
        ``/health`` first answers 200 after failing, so the tick that sees it ready has them."""
        latest = self.poller.latest if self.poller is not None else None
        if self._timings_fetcher is None or latest is None:
            return None
        if latest.outcome != HealthOutcome.OK:
            self._timings_for = None
            return None
        if self._timings_for is not None:
            return None
        self._timings_for = latest.seq
        try:
            return await asyncio.wait_for(self._timings_fetcher(), self.settings.health_timeout_s)
        except Exception as exc:  # an old server has no such figures; never stop the watch
            problems.append(f"/server_info startup_time: {type(exc).__name__}: {exc}")
            return None

    def _orphans(self, probe: ProbeReport | None) -> OrphanReport | None:
        """Leftover SGLang processes, looked for (every ``ORPHANS_EVERY_S`` at most) while
        the port or GPU memory is in question: another process holds the port, or the last
        snapshot has a port, address-in-use, out-of-memory or foreign-GPU-memory flag."""
        if self._orphan_finder is None or not self._port_or_memory_in_question(probe):
            self._orphans_seen = None
            return None
        now = self.clock.monotonic()
        if now >= self._orphans_due:
            self._orphans_due = now + ORPHANS_EVERY_S
            process = probe.process if probe is not None else None
            roots = frozenset({process.pid}) if process is not None else frozenset()
            ports = {p for p in (self.probe.port if self.probe else None,) if p is not None}
            evidence = self.latest.evidence if self.latest is not None else None
            if evidence is not None and evidence.peers is not None:
                ports.add(evidence.peers.dist.port)
            self._orphans_seen = self._orphan_finder(Watched(roots, frozenset(ports)), self._gpu)
        return self._orphans_seen

    def _port_or_memory_in_question(self, probe: ProbeReport | None) -> bool:
        port = probe.port if probe is not None else None
        if port is not None and port.bound and port.held_by_server is False:
            return True
        latest = self.latest
        return latest is not None and any(f.name in ORPHAN_FLAGS for f in latest.flags)

    def _sample(self, probe: ProbeReport | None) -> TreeEvidence | None:
        """The tree's evidence; a sampler per server PID (a restart gets a fresh one)."""
        process = probe.process if probe is not None else None
        if process is None or self._sampler_factory is None:
            return None
        if self._sampler is None or self._sampler.root_pid != process.pid:
            self._sampler = self._sampler_factory(process.pid)
            self._stacks = None
        logged = DistInit.from_server_args(self.state.server_args())
        if logged is not None:
            self._sampler.use_dist(logged)
        return self._sampler.sample(self.clock.monotonic())

    def _start_stacks(self, evidence: TreeEvidence) -> None:
        if self._stack_task is not None and not self._stack_task.done():
            return
        targets = stack_targets(evidence)
        if not targets:
            return
        at = self.clock.monotonic()
        self._stack_task = asyncio.ensure_future(
            asyncio.to_thread(take_stacks, targets, at, self._dumper)
        )

    def _collect_stacks(self, problems: list[str]) -> None:
        task = self._stack_task
        if task is None or not task.done():
            return
        self._stack_task = None
        try:
            self._stacks = task.result()
        except Exception as exc:  # py-spy wrapper never raises; a bug must not stop the watch
            problems.append(f"stacks failed: {type(exc).__name__}: {exc}")

    async def wait_stacks(self) -> None:
        """Wait for stacks being taken, and keep them."""
        if self._stack_task is not None:
            await asyncio.wait({self._stack_task})
            problems: list[str] = []
            self._collect_stacks(problems)

    async def run(
        self,
        on_snapshot: SnapshotCallback | None = None,
        *,
        until: Callable[[HealthSnapshot], bool] | None = None,
        stop: asyncio.Event | None = None,
    ) -> HealthSnapshot:
        """Tick every poll interval until ``until(snapshot)`` is true or ``stop`` is set."""
        while True:
            snapshot = await self.tick()
            if on_snapshot is not None:
                on_snapshot(snapshot)
            if (until is not None and until(snapshot)) or (stop is not None and stop.is_set()):
                return snapshot
            await self.clock.sleep(self.settings.poll_interval_s)

    async def restart_managed(
        self, server: ManagedServer, timeouts: StopTimeouts | None = None
    ) -> RestartResult:
        """Restart a server eagle-tui launched, and watch the new start from its first line
        (the one restart path: the dashboard's ``r`` comes here through its feed).

        The old server is stopped safely (see ``core.proc.stop``) and its log read to the
        end before the new one starts, so the old drain is reported as a stop, not a
        crash, and nothing of either log is lost across the rotation. The new one starts
        only once the old one's port and GPUs are free.
        """
        self.state.request_stop()
        report = await server.stop(timeouts)
        await self.tick()  # fold the old server's last lines and its exit
        if report is not None and not report.clear:
            reason = "; ".join(report.steps[-2:]) or "the old server did not stop"
            return RestartResult(report, started=False, pid=None, reason=reason)
        self.state.new_launch(self.clock.monotonic())
        pid = server.start()
        port = self.probe.port if self.probe is not None else None
        self.probe = ProcessProbe(pid, port=port, exit_code=server.exit_code)
        return RestartResult(report, started=True, pid=pid)

    async def aclose(self) -> None:
        """Stop the poller, close the log and whatever the builder handed over."""
        if self._stack_task is not None:
            await asyncio.wait({self._stack_task})
        if self.poller is not None:
            await self.poller.aclose()
        if self.log is not None:
            self.log.close()
        if self._on_close is not None:
            await self._on_close()

    @staticmethod
    def _guard(step: Callable[[], Any], problems: list[str], what: str) -> Any:
        try:
            return step()
        except Exception as exc:  # a source failing must never stop the watch
            problems.append(f"{what} failed: {type(exc).__name__}: {exc}")
            return None

    def _read_log(self) -> LogChunk | None:
        return self.log.read() if self.log is not None else None

    def _probe(self) -> ProbeReport | None:
        return self.probe.probe() if self.probe is not None else None

    def _read_gpu(self) -> GpuReport | None:
        if self._gpu_reader is None:
            return None
        now = self.clock.monotonic()
        if now >= self._gpu_due:
            self._gpu_due = now + self.settings.gpu_interval_s
            self._gpu = self._gpu_reader()
        return self._gpu

    def _fold(self, observation: Observation) -> HealthSnapshot:
        try:
            return self.state.update(observation)
        except Exception as exc:  # a bug in the state machine: report it, keep watching
            problem = f"internal error while judging: {type(exc).__name__}: {exc}"
            if self.latest is not None:
                return replace(self.latest, problems=(*observation.problems, problem))
            return HealthSnapshot(
                at=observation.wall,
                phase=Phase.DOWN,
                phase_s=0.0,
                elapsed_s=None,
                expected=Expectation(self.settings.default_window_s, "default"),
                window_fraction=None,
                problems=(*observation.problems, problem),
            )

    def _adopt_logged_pid(self) -> None:
        pid = self.state.pid_from_log
        if self.probe is not None and self.probe.pid is None and pid is not None:
            with contextlib.suppress(Exception):
                self.probe.adopt(pid)

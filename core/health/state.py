"""The watcher's state machine: observations in, immutable ``HealthSnapshot`` out.

It does no I/O of its own apart from the start-up history file, so it can be driven
tick by tick with made-up observations and a fake clock. ``core.health.watcher`` feeds it
real ones.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from eagle_tui.core.health.context import HealthRun, TickContext
from eagle_tui.core.health.flags import all_flags
from eagle_tui.core.health.history import (
    Expectations,
    StartupHistory,
    StartupRecord,
    expectations_from,
)
from eagle_tui.core.health.logtrack import LogTracker
from eagle_tui.core.health.phase import STARTUP_PHASES, Phase
from eagle_tui.core.health.phasing import decide_phase
from eagle_tui.core.health.poller import HealthOutcome, HealthProbe
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.signature import signature_from_argv, signature_from_server_args
from eagle_tui.core.health.snapshot import Flag, HealthSnapshot, ServingLoad, StartupProgress
from eagle_tui.core.health.verdict import judge
from eagle_tui.core.proc.report import GpuReport, PortStatus, ProbeReport, ProcessReport
from eagle_tui.core.serverlog.follower import LogChunk
from eagle_tui.core.text import duration, quote

_TIMELINE = (*STARTUP_PHASES, Phase.READY)


@dataclass(frozen=True)
class Observation:
    """What the sources said at one tick. ``None`` means "no such source" (or no news)."""

    now: float
    wall: float
    log: LogChunk | None = None
    probe: ProbeReport | None = None
    health: HealthProbe | None = None
    gpu: GpuReport | None = None
    problems: tuple[str, ...] = ()


class WatchState:
    """Folds observations into snapshots; see the module docstring.

    ``has_log``/``has_process`` say which sources exist (URL-only mode: neither).
    ``signature`` overrides the one read from the log or command line; ``launched_at`` is
    the monotonic launch time when eagle-tui launched the server itself.
    """

    def __init__(
        self,
        settings: WatchSettings | None = None,
        *,
        has_log: bool,
        has_process: bool,
        history: StartupHistory | None = None,
        signature: str | None = None,
        launched_at: float | None = None,
        date_backlog: bool = True,
    ) -> None:
        self.settings = settings or WatchSettings()
        self._log = LogTracker(date_backlog=date_backlog) if has_log else None
        self._has_process = has_process
        self._history = history
        self._explicit_signature = signature
        self._launched_at = launched_at
        self._started: float | None = None
        self._process: ProcessReport | None = None
        self._port: PortStatus | None = None
        self._health = HealthRun()
        self._last_seq = -1
        self._expect_cache: tuple[str | None, Expectations] | None = None
        self._stop_requested = False
        self._new_startup()
        self.recorded: StartupRecord | None = None

    def _new_startup(self) -> None:
        self._generation = self._log.generation if self._log is not None else 0
        self._starts: dict[Phase, float] = {}
        self._phase: Phase | None = None
        self._phase_entered = 0.0
        self._was_ready = False
        self._recorded_ready = False
        self._flag_since: dict[str, float] = {}

    @property
    def pid_from_log(self) -> int | None:
        """The server PID the log announced (uvicorn's ``Started server process``)."""
        return self._log.pid_from_log if self._log is not None else None

    def new_launch(self, launched_at: float | None) -> None:
        """Start over for a server eagle-tui just (re)launched: forget the old one entirely."""
        if self._log is not None:
            self._log.reset()
        self._process = None
        self._port = None
        self._health = HealthRun()
        self._launched_at = launched_at
        self._stop_requested = False
        self._new_startup()

    def request_stop(self) -> None:
        """Tell the state a stop was asked for (managed restart), so an exit is not a crash."""
        self._stop_requested = True

    def update(self, obs: Observation) -> HealthSnapshot:
        """Fold one tick's observations and return the snapshot."""
        if self._started is None:
            self._started = obs.now
        problems = list(obs.problems)
        self._absorb_log(obs, problems)
        self._absorb_probe(obs.probe, problems)
        self._absorb_health(obs.health, problems)
        ctx = self._context(obs)
        phase = decide_phase(ctx)
        self._enter(phase, obs.now)
        flags = self._aged(all_flags(ctx, phase), obs.now)
        self._maybe_record(phase, ctx, obs)
        return self._snapshot(obs, ctx, phase, flags, problems)

    def _absorb_log(self, obs: Observation, problems: list[str]) -> None:
        if self._log is None or obs.log is None:
            return
        self._log.feed(obs.log, obs.now, obs.wall)
        if obs.log.error:
            problems.append(obs.log.error)
        if self._log.generation != self._generation:
            self._new_startup()  # the log shows the server starting again

    def _absorb_probe(self, probe: ProbeReport | None, problems: list[str]) -> None:
        if probe is None:
            return
        problems.extend(probe.problems)
        if probe.process is not None:
            self._process = probe.process
        self._port = probe.port

    def _absorb_health(self, probe: HealthProbe | None, problems: list[str]) -> None:
        if probe is None or probe.seq == self._last_seq:
            return
        self._last_seq = probe.seq
        if probe.outcome == HealthOutcome.ERROR:
            problems.append(f"/health: {probe.detail}")
        slow = probe.latency_s is not None and probe.latency_s > self.settings.slow_health_s
        run = self._health
        if probe.outcome == HealthOutcome.OK and not slow:
            self._health = HealthRun(latest=probe, ever_ok=True)
            return
        refused = probe.outcome == HealthOutcome.REFUSED
        self._health = HealthRun(
            latest=probe,
            failures=run.failures + 1,
            refusals=run.refusals + 1 if refused else 0,
            failing_since=run.failing_since if run.failing_since is not None else probe.at,
            ever_ok=run.ever_ok or probe.outcome == HealthOutcome.OK,
        )

    def _context(self, obs: Observation) -> TickContext:
        assert self._started is not None
        return TickContext(
            now=obs.now,
            settings=self.settings,
            expectations=self._expectations(),
            log=self._log,
            has_process=self._has_process,
            process=self._process,
            port=self._port,
            health=self._health,
            gpu=obs.gpu,
            elapsed_s=obs.now - self._anchor(obs)[0],
            watch_started=self._started,
            was_ready=self._was_ready,
            stop_requested=self._stop_requested,
        )

    def signature(self) -> str | None:
        """The server signature known so far (explicit, from the log, or the command line)."""
        if self._explicit_signature is not None:
            return self._explicit_signature
        if self._log is not None:
            return signature_from_server_args(self._log.server_args)
        if self._process is not None and self._process.cmdline:
            return signature_from_argv(self._process.cmdline.split())
        return None

    def _expectations(self) -> Expectations:
        signature = self.signature()
        if self._expect_cache is None or self._expect_cache[0] != signature:
            if self._history is not None:
                found = self._history.expectations(signature, self.settings)
            else:
                found = expectations_from([], self.settings)
            self._expect_cache = (signature, found)
        return self._expect_cache[1]

    def _anchor(self, obs: Observation) -> tuple[float, str]:
        """When the start-up began (monotonic) and how we know."""
        if self._launched_at is not None:
            return self._launched_at, "launch"
        if self._process is not None and self._process.create_time is not None:
            return obs.now - max(0.0, obs.wall - self._process.create_time), "process"
        if self._log is not None and self._log.args_at is not None:
            return self._log.args_at, "log"
        assert self._started is not None
        return self._started, "watch"

    def _enter(self, phase: Phase, now: float) -> None:
        if phase == self._phase:
            return
        if phase == Phase.READY and not self._was_ready:
            # Failures counted while starting say nothing about the ready server.
            self._health = replace(self._health, failures=0, refusals=0, failing_since=None)
        self._phase = phase
        self._phase_entered = now
        self._starts.setdefault(phase, now)
        self._was_ready = self._was_ready or phase == Phase.READY

    def _aged(self, raised: list[tuple[str, str]], now: float) -> tuple[Flag, ...]:
        since = {name: self._flag_since.get(name, now) for name, _ in raised}
        self._flag_since = since
        return tuple(Flag(name, evidence, now - since[name]) for name, evidence in raised)

    def phase_starts(self) -> dict[Phase, float]:
        """When each phase of this start-up began (the log's dating wins where it has one)."""
        starts = dict(self._starts)
        if self._log is not None:
            for phase, at in self._log.phase_since.items():
                starts[phase] = min(at, starts.get(phase, at))
        order = {phase: index for index, phase in enumerate(Phase)}
        return dict(sorted(starts.items(), key=lambda item: (item[1], order[item[0]])))

    def _durations(self, now: float) -> tuple[tuple[Phase, float], ...]:
        starts = self.phase_starts()
        seen = [p for p in _TIMELINE if p in starts]
        result: list[tuple[Phase, float]] = []
        for index, phase in enumerate(seen):
            following = seen[index + 1] if index + 1 < len(seen) else None
            if phase == Phase.READY:
                break
            end = starts[following] if following is not None else now
            result.append((phase, max(0.0, end - starts[phase])))
        return tuple(result)

    def _maybe_record(self, phase: Phase, ctx: TickContext, obs: Observation) -> None:
        if phase != Phase.READY or self._recorded_ready:
            return
        self._recorded_ready = True
        anchor, how = self._anchor(obs)
        signature = self.signature()
        if self._history is None or signature is None or how == "watch":
            return
        durations = {p.value: d for p, d in self._durations(obs.now)}
        if how == "log":
            durations.pop(Phase.LAUNCHING.value, None)  # process start is unknown
        gaps = {p.value: g for p, g in self._log.max_gap.items()} if self._log else {}
        record = StartupRecord(signature, obs.wall, obs.now - anchor, durations, gaps)
        self._history.append(record)
        self.recorded = record

    def _snapshot(
        self,
        obs: Observation,
        ctx: TickContext,
        phase: Phase,
        flags: tuple[Flag, ...],
        problems: list[str],
    ) -> HealthSnapshot:
        expectation = ctx.expectations.expectation
        log = self._log
        if self._history is not None and self._history.problem:
            problems.append(self._history.problem)
        starts = self.phase_starts()
        stop = None
        if log is not None and log.shutdown is not None:
            stop = quote(log.shutdown.line.text)
            if log.drain_remaining is not None:
                stop += f"; {log.drain_remaining} requests still draining"
        elif self._stop_requested:
            stop = "stop requested by eagle-tui"
        return HealthSnapshot(
            at=obs.wall,
            phase=phase,
            phase_s=obs.now - starts.get(phase, self._phase_entered),
            elapsed_s=ctx.elapsed_s,
            expected=expectation,
            window_fraction=(ctx.elapsed_s / expectation.window_s)
            if ctx.elapsed_s is not None and expectation.window_s > 0
            else None,
            flags=flags,
            verdict=judge(
                phase,
                flags,
                self.settings,
                stop_evidence=stop,
                ready_evidence=self._ready_text(ctx),
            ),
            last_log_line=log.last_line if log else None,
            last_log_age_s=obs.now - log.last_line_at if log and log.last_line_at else None,
            progress=log.progress if log else StartupProgress(),
            load=self._load(obs.now),
            ranks=tuple(sorted(log.ranks.items())) if log else (),
            phase_durations=self._durations(obs.now),
            process=self._process,
            port=self._port,
            health=self._health.latest,
            gpu=obs.gpu,
            signature=self.signature(),
            problems=tuple(problems),
            notes=self._notes(obs),
        )

    def _ready_text(self, ctx: TickContext) -> str:
        latest = ctx.health.latest
        if latest is not None and latest.outcome == HealthOutcome.OK:
            how = f"/health {latest.describe()}"
        else:
            how = "the log says 'fired up and ready to roll'"
        window = ctx.expectations.expectation.window_s
        return f"{how}; {duration(ctx.elapsed_s)} since launch (expected within {duration(window)})"

    def _load(self, now: float) -> ServingLoad | None:
        if self._log is None or self._log.load is None or self._log.load_at is None:
            return None
        b = self._log.load
        return ServingLoad(
            b.kind, b.running, b.queued, b.throughput, b.token_usage, now - self._log.load_at
        )

    def _notes(self, obs: Observation) -> tuple[str, ...]:
        notes = []
        if self._log is None:
            notes.append("no log: progress before the port opens is not visible (pass --log)")
        if not self._has_process:
            notes.append("no process access: a crash is inferred from the port alone")
        if self._anchor(obs)[1] == "watch":
            notes.append("elapsed time counts from when the watch began")
        if obs.gpu is not None and not obs.gpu.available:
            notes.append(obs.gpu.reason)
        return tuple(notes)

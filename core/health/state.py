"""The watcher's state machine: observations in, immutable ``HealthSnapshot`` out.

It does no I/O of its own apart from the start-up history file, so it can be driven
tick by tick with made-up observations and a fake clock. ``core.health.watcher`` feeds it
real ones.

One server incarnation is one start-up timeline. A new one begins when the log shows the
server starting again (a new ``server_args`` line, the file truncated or rotated) or
another process takes the server's place; the previous one is closed in history with its
real outcome (when its beginning was seen). Times run from the start-up's anchor (our
launch, the process's start, the log's ``server_args`` line, or the watch) to now, or to
the moment the process ended, so no phase is longer than the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from eagle_tui.core.health.context import HealthRun, TickContext
from eagle_tui.core.health.flags import Raised, all_flags
from eagle_tui.core.health.history import (
    Expectations,
    StartupHistory,
    StartupRecord,
    expectations_from,
)
from eagle_tui.core.health.logtrack import LogTracker
from eagle_tui.core.health.phase import STARTUP_PHASES, Phase, later
from eagle_tui.core.health.phasing import decide_phase
from eagle_tui.core.health.poller import HealthOutcome, HealthProbe
from eagle_tui.core.health.ranks import Topology, rank_sort_key, topology_fields_from_argv
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.signature import (
    flag_values,
    signature_from_argv,
    signature_from_server_args,
)
from eagle_tui.core.health.snapshot import (
    Flag,
    HealthSnapshot,
    Outcome,
    ServingLoad,
    StartupProgress,
    Verdict,
)
from eagle_tui.core.health.stall import silence
from eagle_tui.core.health.steps import STEP_PHASE
from eagle_tui.core.health.verdict import judge
from eagle_tui.core.proc.report import GpuReport, PortStatus, ProbeReport, ProcessReport
from eagle_tui.core.serverlog import events as ev
from eagle_tui.core.serverlog.follower import LogChunk
from eagle_tui.core.text import duration, quote

_TIMELINE = (*STARTUP_PHASES, Phase.READY)
_TERMINAL = (Phase.CRASHED, Phase.DOWN)
_LAGGING_AFTER_S = 10.0  # ranks interleave; name laggards only once the log has paused
_SEEN_START_SLACK_S = 5.0


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


@dataclass
class _Incarnation:
    """One start-up timeline of the server."""

    generation: int
    launched_at: float | None = None
    pid: int | None = None
    starts: dict[Phase, float] = field(default_factory=dict)
    phase: Phase | None = None
    phase_entered: float = 0.0
    was_ready: bool = False
    ready_at: float | None = None
    ready_after: float | None = None  # frozen when ready is reached
    ended_at: float | None = None
    flag_since: dict[str, float] = field(default_factory=dict)
    verdict: Verdict | None = None
    reached: Phase | None = None
    closed: bool = False
    number: int = 1
    first_phase: Phase | None = None  # what the first look found (ready: an attach)


def implied_phase(fatal: ev.Fatal) -> Phase:
    """The start-up phase a fatal line shows the server was in (launching when it says not).

    An old log may print no phase line before failing: its KV-cache shortage still happened
    while allocating the KV cache, a failed capture while capturing graphs, a failed warm-up
    request or bind while warming up.
    """
    text = fatal.line.text
    if fatal.kind == "oom" and ("mem-fraction-static" in text or "KV cache" in text):
        return Phase.ALLOCATING_KV
    if fatal.kind == "graph_capture_failed":
        return Phase.CAPTURING_GRAPHS
    if fatal.kind in ("address_in_use", "port_in_use") or "warmup" in text:
        return Phase.WARMING_UP
    return Phase.LAUNCHING


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
        self._started: float | None = None
        self._wall_started: float | None = None
        self._process: ProcessReport | None = None
        self._port: PortStatus | None = None
        self._health = HealthRun()
        self._last_seq = -1
        self._expect_cache: tuple[str | None, Expectations] | None = None
        self._stop_requested = False
        self._now = 0.0
        self._wall = 0.0
        self._run = _Incarnation(self._generation(), launched_at=launched_at)
        self.recorded: StartupRecord | None = None

    def _generation(self) -> int:
        return self._log.generation if self._log is not None else 0

    @property
    def pid_from_log(self) -> int | None:
        """The server PID the log announced (uvicorn's ``Started server process``)."""
        return self._log.pid_from_log if self._log is not None else None

    @property
    def log(self) -> LogTracker | None:
        """What the log said (None without a log)."""
        return self._log

    def new_launch(self, launched_at: float | None) -> None:
        """Start over for a server eagle-tui just (re)launched: the old one is closed."""
        self._close(self._run_outcome())
        if self._log is not None:
            self._log.reset()
        self._process = None
        self._port = None
        self._health = HealthRun()
        self._stop_requested = False
        self._begin(launched_at=launched_at)

    def request_stop(self) -> None:
        """Tell the state a stop was asked for (managed restart), so an exit is not a crash."""
        self._stop_requested = True

    def update(self, obs: Observation) -> HealthSnapshot:
        """Fold one tick's observations and return the snapshot."""
        if self._started is None:
            self._started, self._wall_started = obs.now, obs.wall
        self._now, self._wall = obs.now, obs.wall
        problems = list(obs.problems)
        self._absorb_log(obs, problems)
        self._absorb_probe(obs.probe, problems)
        self._absorb_health(obs.health, problems)
        ctx = self._context(obs)
        phase = decide_phase(ctx)
        if self._run.first_phase is None:
            self._run.first_phase = phase
        self._enter(phase, obs.now, ctx)
        flags = self._aged(all_flags(ctx, phase), obs.now)
        verdict = self._judge(phase, flags, ctx)
        self._run.verdict = verdict or self._run.verdict
        self._maybe_record(phase, verdict, obs)
        return self._snapshot(obs, ctx, phase, flags, verdict, problems)

    # -- incarnations ------------------------------------------------------------------------

    def _begin(self, *, launched_at: float | None = None) -> None:
        number = self._run.number + 1
        self._run = _Incarnation(self._generation(), launched_at=launched_at, number=number)

    def _run_outcome(self) -> str:
        verdict = self._run.verdict
        if verdict is not None:
            return verdict.outcome.value
        return "unknown"

    def _close(self, outcome: str) -> None:
        """Close the current timeline in history with ``outcome`` (once)."""
        if self._run.closed:
            return
        self._run.closed = True
        if outcome in (Outcome.READY.value, "unknown") and self._run.was_ready:
            return  # recorded when it became ready
        if outcome != "unknown":
            self._record(outcome, self._run.ended_at or self._now)

    def _absorb_log(self, obs: Observation, problems: list[str]) -> None:
        if self._log is None or obs.log is None:
            return
        self._log.feed(obs.log, obs.now, obs.wall)
        if obs.log.error:
            problems.append(obs.log.error)
        if self._log.generation != self._run.generation:
            self._close(self._run_outcome())  # the log shows the server starting again
            self._health = HealthRun()
            self._stop_requested = False
            self._begin()

    def _absorb_probe(self, probe: ProbeReport | None, problems: list[str]) -> None:
        if probe is None:
            return
        problems.extend(probe.problems)
        if probe.process is not None:
            self._maybe_new_process(probe.process)
            self._process = probe.process
            self._run.pid = probe.process.pid
            if not probe.process.alive and self._run.ended_at is None:
                self._run.ended_at = self._now
        self._port = probe.port

    def _maybe_new_process(self, process: ProcessReport) -> None:
        """Another process took the server's place: a new incarnation (no false crash)."""
        old = self._run.pid
        if old is None or process.pid == old:
            return
        self._close(self._run_outcome())
        log = self._log
        created = self._mono_of(process.create_time)
        if log is not None and (log.args_at is None or created is None or log.args_at < created):
            log.reset()  # what the log says so far was the old process
        self._health = HealthRun()
        self._stop_requested = False
        self._begin()
        self._run.generation = self._generation()

    def _mono_of(self, wall_time: float | None) -> float | None:
        if wall_time is None:
            return None
        return self._now - max(0.0, self._wall - wall_time)

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

    # -- the tick's view ---------------------------------------------------------------------

    def _context(self, obs: Observation) -> TickContext:
        assert self._started is not None
        lagging, behind = self._lagging()
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
            elapsed_s=self._elapsed(),
            watch_started=self._started,
            was_ready=self._run.was_ready,
            stop_requested=self._stop_requested,
            lagging=lagging,
            behind=behind,
        )

    def topology(self) -> Topology:
        """The deployment: the log's ``server_args``, else the command line."""
        fields: dict[str, str] = {}
        if self._process is not None and self._process.cmdline:
            fields.update(topology_fields_from_argv(flag_values(self._process.cmdline.split())))
        if self._log is not None:
            fields.update({k: v for k, v in self._log.server_args.items() if v != "None"})
        return Topology.from_fields(fields)

    def _lagging(self) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
        log = self._log
        if log is None or log.phase is None or log.phase == Phase.READY:
            return (), ()
        assert self._started is not None
        quiet = silence(log, self._started, self._now)
        if quiet < _LAGGING_AFTER_S and not log.crash.failed:
            return (), ()
        topology = self.topology()
        behind = log.ranks.behind(topology)
        where = {
            rank: f"at {STEP_PHASE[step]}" if step is not None else "never logged"
            for rank, step in behind.items()
        }
        if not where and any(f.event.kind == "dist_timeout" for f in log.fatals):
            # The store timed out waiting for peers: the ranks it waited for run elsewhere.
            where = dict.fromkeys(topology.other_node_ranks(), "on another node")
        names = tuple(sorted(where, key=rank_sort_key))
        return names, tuple((name, where[name]) for name in names)

    def signature(self) -> str | None:
        """The server signature known so far (explicit, from the log, or the command line)."""
        if self._explicit_signature is not None:
            return self._explicit_signature
        if self._log is not None:
            found = signature_from_server_args(self._log.server_args)
            if found is not None:
                return found
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

    def _anchor(self) -> tuple[float, str]:
        """When this start-up began (monotonic) and how we know."""
        run = self._run
        if run.launched_at is not None:
            return run.launched_at, "launch"
        process = self._process
        if process is not None and process.pid == run.pid:
            created = self._mono_of(process.create_time)
            log_start = self._log.args_at if self._log is not None else None
            if created is not None and (log_start is None or created <= log_start + 1.0):
                return created, "process"
        if self._log is not None and self._log.args_at is not None:
            return self._log.args_at, "log"
        assert self._started is not None
        return self._started, "watch"

    def _beginning_seen(self) -> bool:
        """The start of this start-up was watched, or can be read from the log's dates; an
        attach to a server that was already up never counts."""
        anchor, how = self._anchor()
        if how == "launch":
            return True
        if self._run.first_phase in (Phase.READY, Phase.DEGRADED):
            return False
        assert self._started is not None
        if how == "process" and anchor >= self._started - _SEEN_START_SLACK_S:
            return True
        return self._log is not None and self._log.args_at is not None and self._log.args_dated

    def _elapsed(self) -> float:
        end = self._run.ended_at if self._run.ended_at is not None else self._now
        return max(0.0, end - self._anchor()[0])

    def _enter(self, phase: Phase, now: float, ctx: TickContext) -> None:
        run = self._run
        if self._log is not None and self._log.phase is not None:
            run.reached = self._log.phase
        elif phase in _TIMELINE:
            run.reached = phase
        if self._log is not None:
            for timed in self._log.fatals:
                run.reached = later(run.reached, implied_phase(timed.event))
            if run.reached is None and self._log.lines:
                run.reached = Phase.LAUNCHING  # it logged, so it was at least launching
        if phase == run.phase:
            return
        if phase == Phase.READY and not run.was_ready:
            # Failures counted while starting say nothing about the ready server.
            self._health = replace(self._health, failures=0, refusals=0, failing_since=None)
            run.ready_at = self._ready_time(now)
            run.ready_after = max(0.0, run.ready_at - self._anchor()[0])
        run.phase = phase
        run.phase_entered = now
        run.starts.setdefault(phase, now)
        run.was_ready = run.was_ready or phase == Phase.READY

    def _ready_time(self, now: float) -> float:
        if self._log is not None and Phase.READY in self._log.phase_since:
            return min(now, self._log.phase_since[Phase.READY])
        return now

    def _aged(self, raised: list[Raised], now: float) -> tuple[Flag, ...]:
        since = {r.name: self._run.flag_since.get(r.name, now) for r in raised}
        self._run.flag_since = since
        return tuple(Flag(r.name, r.evidence, now - since[r.name], r.next_step) for r in raised)

    def _settled(self) -> bool:
        """The failure's evidence is complete: the process is gone or the log went quiet."""
        if self._process is not None and not self._process.alive:
            return True
        log = self._log
        if log is None:
            return True
        return log.crash.settled(log.last_line_at, self._now, self.settings.crash_settle_s)

    def _judge(self, phase: Phase, flags: tuple[Flag, ...], ctx: TickContext) -> Verdict | None:
        return judge(
            phase,
            flags,
            self.settings,
            stop_evidence=self._stop_evidence(),
            ready_evidence=self._ready_text(ctx),
            settled=self._settled(),
            reached=self._run.reached,
        )

    def _stop_evidence(self) -> str | None:
        log = self._log
        if log is not None and log.shutdown is not None:
            text = quote(log.shutdown.line.text)
            if log.drain_remaining is not None:
                text += f"; {log.drain_remaining} requests still draining"
            return text
        if log is not None and log.crash.stop_echoes:
            return f"ranks ended by a signal: {quote(log.crash.stop_echoes[0].line.text)}"
        if self._process is not None and self._process.exit_code in (-15, -2):
            return f"PID {self._process.pid} {self._process.describe_exit()}"
        if self._stop_requested:
            return "stop requested by eagle-tui"
        return None

    # -- history -----------------------------------------------------------------------------

    def phase_starts(self) -> dict[Phase, float]:
        """When each phase of this start-up began (the log's dating wins where it has one)."""
        starts = dict(self._run.starts)
        if self._log is not None:
            for phase, at in self._log.phase_since.items():
                starts[phase] = min(at, starts.get(phase, at))
        anchor = self._anchor()[0]
        starts = {p: max(at, anchor) if p in _TIMELINE else at for p, at in starts.items()}
        order = {phase: index for index, phase in enumerate(Phase)}
        return dict(sorted(starts.items(), key=lambda item: (item[1], order[item[0]])))

    def _durations(self, now: float) -> tuple[tuple[Phase, float], ...]:
        starts = self.phase_starts()
        seen = [p for p in _TIMELINE if p in starts]
        end_of_run = self._run.ended_at if self._run.ended_at is not None else now
        result: list[tuple[Phase, float]] = []
        for index, phase in enumerate(seen):
            following = seen[index + 1] if index + 1 < len(seen) else None
            if phase == Phase.READY:
                break
            end = starts[following] if following is not None else end_of_run
            result.append((phase, max(0.0, end - starts[phase])))
        return tuple(result)

    def _maybe_record(self, phase: Phase, verdict: Verdict | None, obs: Observation) -> None:
        run = self._run
        if run.closed:
            return
        if phase == Phase.READY:
            run.closed = True
            self._record(Outcome.READY.value, run.ready_at or obs.now)
        elif verdict is not None and verdict.outcome in (Outcome.CRASHED, Outcome.STOPPED):
            if run.was_ready:
                run.closed = True  # the start-up itself was recorded when it became ready
                return
            run.closed = True
            self._record(verdict.outcome.value, run.ended_at or obs.now)

    def _record(self, outcome: str, end: float) -> None:
        signature = self.signature()
        if self._history is None or signature is None or not self._beginning_seen():
            return
        anchor, how = self._anchor()
        durations = {p.value: d for p, d in self._durations(end)}
        if how == "log":
            durations.pop(Phase.LAUNCHING.value, None)  # process start is unknown
        log = self._log
        gaps = {p.value: g for p, g in log.max_gap.items()} if log else {}
        step_gaps = {s.value: g for s, g in log.max_step_gap.items()} if log else {}
        wall_end = self._wall - (self._now - end)
        record = StartupRecord(
            signature, wall_end, end - anchor, durations, gaps, outcome, step_gaps
        )
        self._history.append(record)
        self.recorded = record

    # -- the snapshot ------------------------------------------------------------------------

    def _snapshot(
        self,
        obs: Observation,
        ctx: TickContext,
        phase: Phase,
        flags: tuple[Flag, ...],
        verdict: Verdict | None,
        problems: list[str],
    ) -> HealthSnapshot:
        expectation = ctx.expectations.expectation
        log = self._log
        run = self._run
        if self._history is not None and self._history.problem:
            problems.append(self._history.problem)
        elapsed = self._elapsed()
        return HealthSnapshot(
            at=obs.wall,
            phase=phase,
            phase_s=self._phase_seconds(phase, obs.now),
            elapsed_s=elapsed,
            expected=expectation,
            window_fraction=elapsed / expectation.window_s if expectation.window_s > 0 else None,
            flags=flags,
            verdict=verdict,
            last_log_line=log.last_line if log else None,
            last_log_age_s=obs.now - log.last_line_at if log and log.last_line_at else None,
            progress=log.progress if log else StartupProgress(),
            load=self._load(obs.now),
            ranks=tuple(sorted(log.ranks.phases().items())) if log else (),
            phase_durations=self._durations(obs.now),
            process=self._process,
            port=self._port,
            health=self._health.latest,
            gpu=obs.gpu,
            signature=self.signature(),
            problems=tuple(problems),
            notes=self._notes(obs),
            reached=run.reached,
            step=log.step.value if log and log.step else None,
            ready_after_s=run.ready_after,
            lagging_ranks=ctx.lagging,
            unknown_lines=log.unknown if log else 0,
            unknown_samples=tuple(log.unknown_lines) if log else (),
            incarnation=run.number,
        )

    def _phase_seconds(self, phase: Phase, now: float) -> float:
        if phase in _TERMINAL:
            return max(0.0, now - self._run.phase_entered)
        start = self.phase_starts().get(phase, self._run.phase_entered)
        return max(0.0, now - start)

    def _ready_text(self, ctx: TickContext) -> str:
        latest = ctx.health.latest
        if latest is not None and latest.outcome == HealthOutcome.OK:
            how = f"/health {latest.describe()}"
        else:
            how = "the log says 'fired up and ready to roll'"
        window = ctx.expectations.expectation.window_s
        took = self._run.ready_after if self._run.ready_after is not None else ctx.elapsed_s
        return f"{how}; {duration(took)} since launch (expected within {duration(window)})"

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
        if self._anchor()[1] == "watch":
            notes.append("elapsed time counts from when the watch began")
        if self._log is not None and self._log.clock.offset is not None:
            notes.append(f"earlier lines dated by their own timestamps ({self._log.clock.how})")
        if not self._beginning_seen() and self._history is not None:
            notes.append("attached after this start-up began: it is not recorded in history")
        if obs.gpu is not None and not obs.gpu.available:
            notes.append(obs.gpu.reason)
        return tuple(notes)

"""The watcher's state machine: observations in, immutable ``HealthSnapshot`` out.

It does no I/O of its own apart from the start-up history file, so it can be driven
tick by tick with made-up observations and a fake clock. ``core.health.watcher`` feeds it
real ones.

One server incarnation is one start-up timeline. A new one begins when the log shows the
server starting again (a new ``server_args`` line, the file truncated or rotated) or
another process takes the server's place; the previous one is closed in history with its
real outcome (when its beginning was seen).

``WatchState`` only folds and decides; each other job has its own module: what the sources
said (``observed``), the incarnation and its times (``timeline``), start-up history
(``recorder``), which server this is and its lagging ranks (``deployment``), the verdict's
evidence (``evidence``), and the snapshot, built by a pure function (``snapshot_build``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from eagle_tui.core.health.cause import Cause, read_cause
from eagle_tui.core.health.context import TickContext
from eagle_tui.core.health.deployment import lagging_ranks, server_signature, topology
from eagle_tui.core.health.evidence import ready_text, settled, stop_evidence
from eagle_tui.core.health.flags import BUSY, all_flags
from eagle_tui.core.health.history import StartupHistory, StartupRecord
from eagle_tui.core.health.logtrack import LogTracker
from eagle_tui.core.health.observed import Observation, Observed
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.phasing import decide_phase
from eagle_tui.core.health.ranks import Topology
from eagle_tui.core.health.recorder import StartupRecorder
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import Flag, HealthSnapshot, Outcome, Verdict
from eagle_tui.core.health.snapshot_build import TickState, build_snapshot
from eagle_tui.core.health.timeline import Incarnation, Timeline, aged_flags, enter
from eagle_tui.core.health.verdict import judge
from eagle_tui.core.proc.report import ProbeReport, ProcessReport


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
        self._recorder = StartupRecorder(history)
        self._explicit_signature = signature
        self._seen = Observed()
        self._run = Incarnation(self._generation(), launched_at=launched_at)
        self._busy_at: float | None = None

    @property
    def pid_from_log(self) -> int | None:
        """The server PID the log announced (uvicorn's ``Started server process``)."""
        return self._log.pid_from_log if self._log is not None else None

    @property
    def log(self) -> LogTracker | None:
        """What the log said (None without a log)."""
        return self._log

    @property
    def recorded(self) -> StartupRecord | None:
        """The last start-up this watch wrote into history."""
        return self._recorder.recorded

    def new_launch(self, launched_at: float | None) -> None:
        """Start over for a server eagle-tui just (re)launched: the old one is closed."""
        self._close()
        if self._log is not None:
            self._log.reset()
        self._seen.process = None
        self._seen.port = None
        self._seen.forget_server()
        self._begin(launched_at=launched_at)

    def request_stop(self) -> None:
        """Tell the state a stop was asked for (managed restart), so an exit is not a crash."""
        self._seen.stop_requested = True

    def update(self, obs: Observation) -> HealthSnapshot:
        """Fold one tick's observations and return the snapshot."""
        self._seen.tick(obs)
        problems = list(obs.problems)
        self._absorb_log(obs, problems)
        if obs.server_timings:
            self._recorder.server_timings = dict(obs.server_timings)
        self._absorb_probe(obs.probe, problems)
        self._seen.absorb_health(obs.health, self.settings.slow_health_s, problems)
        ctx = self._context(obs)
        phase = decide_phase(ctx)
        informed = self._informed(obs)
        if self._run.first_phase is None and informed:
            self._run.first_phase = phase
        if enter(self._timeline, phase, obs.now):
            # Failures counted while starting say nothing about the ready server.
            health = self._seen.health
            self._seen.health = replace(health, failures=0, refusals=0, failing_since=None)
        if self._run.first_entered is None and informed:
            self._run.first_entered = self._run.phase_entered  # what the first look found
        raised = all_flags(ctx, phase)
        aged = aged_flags(self._run, raised, obs.now)
        # busy is no problem: it is shown beside the flags (the card, watch's events)
        busy = next((f for f in aged if f.name == BUSY), None)
        flags = tuple(f for f in aged if f.name != BUSY)
        wants_stacks = _wants_stacks(obs, (*flags, *([busy] if busy else [])))
        verdict = self._judge(phase, flags, ctx)
        if verdict is not None and verdict.outcome == Outcome.STALLED and wants_stacks:
            verdict = None  # the verdict quotes the ranks' stacks: wait for them (seconds)
        self._run.verdict = verdict or self._run.verdict
        self._recorder.on_tick(self._timeline, self.signature(), phase, verdict, obs.now)
        if self._recorder.problem:
            problems.append(self._recorder.problem)
        return build_snapshot(TickState(
            obs, self._timeline, ctx, phase, flags, verdict, self.signature(), tuple(problems),
            keeps_history=self._recorder.keeps_history, wants_stacks=wants_stacks, busy=busy,
        ))

    def _informed(self, obs: Observation) -> bool:
        """The look can tell the phase: the log was read, ``/health`` answered (or failed
        to), or the process is gone. A look before any of that guesses, and the phase it
        guessed was not seen to begin."""
        process = obs.probe.process if obs.probe is not None else None
        gone = process is not None and not process.alive
        return self._log is not None or obs.health is not None or gone

    def signature(self) -> str | None:
        """The server signature known so far (explicit, from the log, or the command line)."""
        return server_signature(self._explicit_signature, self._log, self._seen.process)

    def topology(self) -> Topology:
        """The deployment: the log's ``server_args``, else the command line."""
        return topology(self._log, self._seen.process)

    def server_args(self) -> Mapping[str, str]:
        """The log's ``server_args`` settings ({} before the line, or without a log)."""
        return self._log.server_args if self._log is not None else {}

    def phase_starts(self) -> dict[Phase, float]:
        """When each phase of this start-up began (the log's dating wins where it has one)."""
        return self._timeline.phase_starts()

    # -- incarnations ------------------------------------------------------------------------

    @property
    def _timeline(self) -> Timeline:
        return Timeline(self._run, self._seen, self._log)

    def _generation(self) -> int:
        return self._log.generation if self._log is not None else 0

    def _begin(self, *, launched_at: float | None = None) -> None:
        number = self._run.number + 1
        self._run = Incarnation(self._generation(), launched_at=launched_at, number=number)
        self._busy_at = None
        self._recorder.server_timings = {}

    def _close(self) -> None:
        """Close the current timeline in history with its outcome so far (once)."""
        self._recorder.close(self._timeline, self.signature())

    def _absorb_log(self, obs: Observation, problems: list[str]) -> None:
        if self._log is None or obs.log is None:
            return
        self._log.feed(obs.log, obs.now, obs.wall)
        if obs.log.error:
            problems.append(obs.log.error)
        if self._log.generation != self._run.generation:
            self._close()  # the log shows the server starting again
            self._seen.forget_server()
            self._begin()

    def _absorb_probe(self, probe: ProbeReport | None, problems: list[str]) -> None:
        if probe is None:
            return
        problems.extend(probe.problems)
        if probe.process is not None:
            self._maybe_new_process(probe.process)
            self._seen.process = probe.process
            self._run.pid = probe.process.pid
            if not probe.process.alive and self._run.ended_at is None:
                self._run.ended_at = self._seen.now
        self._seen.port = probe.port

    def _maybe_new_process(self, process: ProcessReport) -> None:
        """Another process took the server's place: a new incarnation (no false crash)."""
        old = self._run.pid
        if old is None or process.pid == old:
            return
        self._close()
        log = self._log
        created = self._seen.mono_of(process.create_time)
        if log is not None and (log.args_at is None or created is None or log.args_at < created):
            log.reset()  # what the log says so far was the old process
        self._seen.forget_server()
        self._begin()
        self._run.generation = self._generation()

    # -- the tick's view ---------------------------------------------------------------------

    def _context(self, obs: Observation) -> TickContext:
        seen = self._seen
        assert seen.started is not None
        lagging, behind = lagging_ranks(self._log, seen.process, seen.started, seen.now)
        reading = read_cause(obs.evidence)
        if reading is not None and reading.cause is Cause.BUSY:
            self._busy_at = obs.now
        return TickContext(
            now=obs.now,
            settings=self.settings,
            expectations=self._recorder.expectations(self.signature(), self.settings),
            log=self._log,
            has_process=self._has_process,
            process=seen.process,
            port=seen.port,
            health=seen.health,
            gpu=obs.gpu,
            elapsed_s=self._timeline.elapsed(),
            watch_started=seen.started,
            was_ready=self._run.was_ready,
            stop_requested=seen.stop_requested,
            lagging=lagging,
            behind=behind,
            reading=reading,
            busy_at=self._busy_at,
            stacks=obs.stacks,
            orphans=obs.orphans,
        )

    def _judge(self, phase: Phase, flags: tuple[Flag, ...], ctx: TickContext) -> Verdict | None:
        seen = self._seen
        return judge(
            phase,
            flags,
            self.settings,
            stop_evidence=stop_evidence(self._log, seen.process, seen.stop_requested),
            ready_evidence=ready_text(ctx, self._run.ready_after),
            settled=settled(self._log, seen.process, seen.now, self.settings),
            reached=self._run.reached,
        )


def _wants_stacks(obs: Observation, flags: tuple[Flag, ...]) -> bool:
    """A stall or busy incident whose stacks were not taken since it was raised."""
    if not obs.stacks_possible:
        return False
    incident = [f for f in flags if f.name in ("stalled", "busy")]
    if not incident:
        return False
    raised_at = obs.now - min(f.since_s for f in incident)
    return obs.stacks is None or obs.stacks.at < raised_at

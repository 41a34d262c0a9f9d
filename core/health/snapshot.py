"""Immutable results of the watcher: flags with evidence, start-up progress, snapshots.

A ``HealthSnapshot`` is everything a screen or the ``watch`` verb shows about a server at
one moment. Nothing in it changes after it is made; the watcher makes a new one each tick.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.poller import HealthProbe
from eagle_tui.core.proc.evidence import TreeEvidence
from eagle_tui.core.proc.orphans import OrphanReport
from eagle_tui.core.proc.report import GpuReport, PortStatus, ProcessReport
from eagle_tui.core.proc.stacks import StackReport


@dataclass(frozen=True)
class Flag:
    """Something wrong or worth knowing, with the evidence that raised it.

    ``name`` is one of ``slow_startup``, ``stalled``, ``port_conflict``, ``fatal:<kind>``,
    ``exception`` (a traceback no fatal line explains), ``gpu_memory_held``, ``degraded``,
    ``process_exited`` (the evidence of a crash or a stop), ``rank_exited``; ``since_s`` is
    how long it has been up; ``next_step`` is what a person can do about it. ``cause`` is
    what the processes say about a ``stalled`` or ``busy`` flag (``core.health.cause``:
    ``hung``, ``waiting for peers``, ``blocked on I/O``, ``stopped``, ``busy``; empty when
    they were not seen).
    """

    name: str
    evidence: str
    since_s: float = 0.0
    next_step: str = ""
    cause: str = ""


class Outcome(StrEnum):
    """How a watch ends."""

    READY = "ready"
    CRASHED = "crashed"
    STALLED = "stalled"
    PORT_CONFLICT = "port_conflict"
    STOPPED = "stopped"
    TIMEOUT = "timeout"


@dataclass(frozen=True)
class Verdict:
    """A conclusion a watch can stop on, with a one-line diagnosis naming the evidence and
    what to do next. ``cause`` refines a stall (see ``Flag.cause``)."""

    outcome: Outcome
    diagnosis: str
    next_step: str = ""
    cause: str = ""


@dataclass(frozen=True)
class StartupProgress:
    """What the log has said so far about loading, the KV cache, graphs and limits."""

    shards_done: int | None = None
    shards_total: int | None = None
    shards_percent: int | None = None
    weights_gb: float | None = None
    kv_tokens: int | None = None
    kv_size_gb: float | None = None
    graph_percent: int | None = None
    graph_batch_size: int | None = None
    graph_stages_done: int = 0
    graphs_disabled: bool = False
    avail_gb: float | None = None
    max_total_num_tokens: int | None = None
    max_running_requests: int | None = None
    context_len: int | None = None
    warmup_done: bool = False


@dataclass(frozen=True)
class ServingLoad:
    """Requests running and queued, tokens/s, and when that was true.

    ``source`` is where the figures come from: ``log`` (the latest ``Prefill``/``Decode
    batch`` line, ``kind`` says which) or ``metrics`` (the server's ``/metrics`` gauges).
    ``at`` is the wall time they were true (the line's time, the scrape's), ``age_s`` how
    long ago. ``current`` is False once they expired (a log line older than a few
    decode-log intervals: ``core.health.load``) or the server is not serving: the figures
    are then no load at all, and ``idle_since`` (wall time, None when unknown) says since
    when nothing was logged.
    """

    kind: str
    running: int
    queued: int | None
    throughput: float | None
    token_usage: float | None
    age_s: float
    at: float | None = None
    source: str = "log"
    current: bool = True
    idle_since: float | None = None

    @property
    def counts(self) -> bool:
        """The figures are load now (they go into totals)."""
        return self.current


@dataclass(frozen=True)
class Expectation:
    """How long this server usually takes, and where that figure comes from."""

    window_s: float
    source: str
    starts_recorded: int = 0
    typical_phase_s: tuple[tuple[Phase, float], ...] = ()


@dataclass(frozen=True)
class HealthSnapshot:
    """The server at one moment, from every source the watcher has.

    Times are seconds. ``elapsed_s`` counts from the launch (the process start time when
    known) until now, or until the process ended; ``ready_after_s`` is how long the start-up
    took, frozen once ready; ``window_fraction`` is ``elapsed_s / expected.window_s``.
    ``last_log_line`` is the newest line (a live progress bar counts; our own polls'
    access lines do not) and ``last_log_age_s`` how long ago it was written (by its own
    timestamp, or the file's last write, when the watch attached late).
    ``reached`` is the furthest start-up phase the server got to (where a crash or stall
    happened); ``step`` the finer point within it; ``lagging_ranks`` the ranks behind the
    others. ``unknown_lines`` counts log lines no pattern read (``unknown_samples`` the
    latest). ``evidence`` is the server tree's latest process evidence (``core.proc``), ``stacks``
    the ranks' latest Python stacks (taken once per stall incident, or on demand), and
    ``wants_stacks`` asks the watcher to take them (a stall verdict waits for them).
    ``orphans`` are leftover SGLang processes of earlier runs, looked for while the port or
    GPU memory is in question (a port conflict, an address-in-use or out-of-memory failure).
    ``busy`` (no flag: nothing is wrong) says what the processes do while the log has been
    silent past its step's limit, and how fast (``core.health.cause``).
    ``problems`` are things that went wrong while looking (an unreadable log, a
    garbage ``/health`` body, a probe error); ``notes`` explain what cannot be seen.
    """

    at: float
    phase: Phase
    phase_s: float | None  # None: the phase's start is not known (found there at attach)
    elapsed_s: float | None
    expected: Expectation
    window_fraction: float | None
    flags: tuple[Flag, ...] = ()
    verdict: Verdict | None = None
    last_log_line: str | None = None
    last_log_age_s: float | None = None
    progress: StartupProgress = field(default_factory=StartupProgress)
    load: ServingLoad | None = None
    ranks: tuple[tuple[str, Phase], ...] = ()
    phase_durations: tuple[tuple[Phase, float], ...] = ()
    process: ProcessReport | None = None
    port: PortStatus | None = None
    health: HealthProbe | None = None
    gpu: GpuReport | None = None
    signature: str | None = None
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    reached: Phase | None = None
    step: str | None = None
    ready_after_s: float | None = None
    lagging_ranks: tuple[str, ...] = ()
    unknown_lines: int = 0
    unknown_samples: tuple[str, ...] = ()
    incarnation: int = 1
    evidence: TreeEvidence | None = None
    stacks: StackReport | None = None
    wants_stacks: bool = False
    orphans: OrphanReport | None = None
    busy: Flag | None = None

    def flag(self, name: str) -> Flag | None:
        """The flag called ``name`` (or starting with ``name`` + ':'), if raised."""
        for flag in self.flags:
            if flag.name == name or flag.name.startswith(name + ":"):
                return flag
        return None

    @property
    def flag_names(self) -> tuple[str, ...]:
        """Names of the raised flags."""
        return tuple(f.name for f in self.flags)

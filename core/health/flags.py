"""The flags of one tick, each with the evidence that raised it and a next step (README,
Server view; docs/startup-diagnosis.md).

Evidence quotes the log line (and the exception that ends its traceback), counts the
seconds without progress against the step's limit, names the ranks behind the others or
the PID holding the port, so a reader at 2 a.m. can act on it without opening another
window; ``core.health.nextstep`` says what to do.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from eagle_tui.core.health import nextstep
from eagle_tui.core.health.cause import Cause, CauseReading
from eagle_tui.core.health.context import TickContext
from eagle_tui.core.health.phase import Phase, is_starting
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.stall import StallLimit, silence, stall_limit
from eagle_tui.core.outside import clean, quote
from eagle_tui.core.proc.orphans import OrphanReport
from eagle_tui.core.proc.report import ProcessReport
from eagle_tui.core.text import clip, duration


@dataclass(frozen=True)
class Raised:
    """A flag raised this tick (``Flag`` without its age)."""

    name: str
    evidence: str
    next_step: str = ""
    cause: str = ""


# When several fatal lines appear, the most specific names the cause.
FATAL_PRIORITY = (
    "oom",
    "nccl",
    "dist_timeout",
    "address_in_use",
    "port_in_use",
    "graph_capture_failed",
    "cuda_error",
    "watchdog_timeout",
    "fatal_signal",
    "killed",
    "rank_died",
    "subprocess_crashed",
    "child_exited",
    "health_check_failed",
    "init_failed",
    "scheduler_exception",
    "native_backtrace",
    "child_failed",
)


def all_flags(c: TickContext, phase: Phase) -> list[Raised]:
    """Every flag raised by this tick's evidence, most serious first, made clean."""
    stalls = stall_flags(c, phase)
    raised = [
        *fatal_flags(c),
        *exception_flags(c),
        *exit_flags(c, phase),
        *port_flags(c),
        *stalls,
        *degraded_flags(c, phase),
        *rank_flags(c, phase),
        *gpu_flags(c, phase),
        *slow_flags(c, phase, stalled=any(r.name == "stalled" for r in stalls)),
    ]
    return [_cleaned(r) for r in raised]


def _cleaned(raised: Raised) -> Raised:
    """The flag with its texts made clean (``core.outside``) once, whatever piece of
    others' text (a log line, a command line, a title, a path, a stack) went into them:
    every front end shows these texts as they are."""
    return replace(raised, evidence=clean(raised.evidence), next_step=clean(raised.next_step))


def fatal_flags(c: TickContext) -> list[Raised]:
    """``fatal:<kind>`` per fatal log line, quoting it and the traceback's exception."""
    if c.log is None:
        return []
    order = {kind: i for i, kind in enumerate(FATAL_PRIORITY)}
    fatals = sorted(c.log.fatals, key=lambda f: order.get(f.event.kind, len(order)))
    raised = []
    for timed in fatals:
        event = timed.event
        parts = [f"log line {quote(event.line.text)}"]
        if event.exit_code is not None:
            parts.append(f"exit code {event.exit_code}{_exit_hint(event.exit_code)}")
        exception = c.log.exception_line
        if exception and exception.strip() != event.line.text.strip():
            parts.append(f"exception {quote(exception)}")
        step = nextstep.fatal_step(event.kind, event.line.text, event.exit_code)
        if event.kind in ORPHAN_FATALS and c.orphans is not None and c.orphans.orphans:
            parts.append(_orphans_evidence(c.orphans))
            step = _orphans_step(c.orphans)
        raised.append(Raised(f"fatal:{event.kind}", "; ".join(parts), step))
    return raised


BUSY = "busy"
"""Not a flag: raised with them, then set apart (``HealthSnapshot.busy``): work the processes
show while the log is silent past its limit, which keeps the start-up alive."""

ORPHAN_FATALS = frozenset({"address_in_use", "port_in_use", "oom"})
"""Failures a leftover of an earlier run causes (holding the port or GPU memory)."""


def _orphans_evidence(report: OrphanReport) -> str:
    listed = "; ".join(o.describe() for o in report.orphans[:3])
    more = f" (+{len(report.orphans) - 3} more)" if len(report.orphans) > 3 else ""
    return f"leftover SGLang processes of an earlier run: {listed}{more}"


def _orphans_step(report: OrphanReport) -> str:
    return f"{report.step()}; then start again" if report.ours else report.step()


def _port_and_orphans_step(holder_pid: int | None, port_step: str,
                           report: OrphanReport) -> str:
    """Stopping the leftovers frees the port when the holder is one of the user's own (or
    unknown); otherwise the holder comes first: leftovers elsewhere do not free it."""
    ours = {o.pid for o in report.ours}
    if ours and (holder_pid is None or holder_pid in ours):
        return _orphans_step(report)
    return f"{port_step}; also: {report.step()}"


def exception_flags(c: TickContext) -> list[Raised]:
    """``exception``: a traceback no fatal line explains, ending in its exception line."""
    log = c.log
    if log is None or log.fatals or not log.crash.bare_exception or not log.exception_line:
        return []
    evidence = f"traceback ending in {quote(log.exception_line)}"
    return [Raised("exception", evidence, nextstep.EXCEPTION_STEP)]


def _exit_hint(code: int) -> str:
    return " (SIGKILL: often the kernel OOM killer; check dmesg)" if code in (-9, 137) else ""


def exit_flags(c: TickContext, phase: Phase) -> list[Raised]:
    """``process_exited`` when the server process is gone, with how and what came last."""
    proc = c.process
    if proc is None or proc.alive:
        return []
    how = "was not found" if proc.status == "not-found" else proc.describe_exit()
    if phase == Phase.DOWN:
        why = "after a shutdown request" if c.stopping else "after the stop"
        return [Raised("process_exited", f"PID {proc.pid} {how} {why}")]
    parts = [f"PID {proc.pid} {how}", _what_the_log_said(c), _last_line_evidence(c)]
    evidence = "; ".join(p for p in parts if p)
    said = c.log is not None and (c.log.crash.failed or c.log.exception_line is not None)
    step = "" if said else nextstep.exit_step(proc.exit_code)  # the log's error says it
    return [Raised("process_exited", evidence, step)]


def _what_the_log_said(c: TickContext) -> str:
    log = c.log
    if log is None:
        return "no log to say why"
    if log.fatals:
        return ""
    if log.exception_line:
        return f"the log ends in an exception: {quote(log.exception_line)}"
    if log.crash.last_error is not None:
        return f"last error line {quote(log.crash.last_error.line.text)}"
    return "no fatal line in the log"


def _last_line_evidence(c: TickContext) -> str:
    if c.log is None or c.log.last_line_at is None:
        return ""
    age = duration(c.now - c.log.last_line_at)
    return f"last log line {age} ago: {quote(c.log.last_line)}"


def port_flags(c: TickContext) -> list[Raised]:
    """``port_conflict``: the port is held by a process that is not the server."""
    port = c.port
    if port is not None and port.bound and port.held_by_server is False:
        server = f"the server (PID {c.process.pid})" if c.process is not None else "the server"
        evidence = (
            f"port {port.port} is held by {port.describe_holder()}, not by {server}; "
            "SGLang only finds out at bind time, after loading every weight"
        )
        holder = clip(port.holder_cmdline or port.holder_name or "the holder", 80)
        step = nextstep.port_step(port.holder_pid, holder)
        if c.orphans is not None and c.orphans.orphans:
            evidence += "; " + _orphans_evidence(c.orphans)
            step = _port_and_orphans_step(port.holder_pid, step, c.orphans)
        return [Raised("port_conflict", evidence, step)]
    if c.foreign_answer_suspected() and c.log is not None and c.health.latest is not None:
        evidence = (
            f"/health answered {c.health.latest.describe()} while the log shows "
            f"{c.log.phase}: another server holds the port"
        )
        return [Raised("port_conflict", evidence, nextstep.port_step(None, ""))]
    return []


def stall_flags(c: TickContext, phase: Phase) -> list[Raised]:
    """``stalled``: no progress in a start-up phase for longer than its step's limit; with
    the processes in view, made specific (``core.health.cause``): ``busy`` instead while they
    work, and stopped / waiting for peers / blocked on I/O as soon as that has held long
    enough, whatever the step's limit."""
    log = c.log
    if log is None or not is_starting(phase):
        return []
    log_quiet = silence(log, c.watch_started, c.now)
    quiet = log_quiet if c.busy_at is None else min(log_quiet, c.now - c.busy_at)
    limit = stall_limit(log, phase, c.settings, c.expectations)
    reading = c.reading
    if reading is not None and _early(reading, log_quiet, phase, c.settings):
        return [_stalled(c, phase, log_quiet, limit, reading)]
    if reading is not None and reading.cause is Cause.BUSY and log_quiet > limit.seconds:
        return [_busy_flag(c, phase, log_quiet, limit, reading)]
    if quiet <= limit.seconds:
        return []
    return [_stalled(c, phase, log_quiet, limit, reading)]


def _early(reading: CauseReading, log_quiet: float, phase: Phase,
           settings: WatchSettings) -> bool:
    """A cause the processes prove, held long enough to call before the step's limit (a
    hang only when no limit was set outright with ``--stall``)."""
    if reading.cause is Cause.STOPPED:
        return reading.for_s >= settings.stopped_after_s
    if reading.cause is Cause.HUNG and phase in settings.stall_limits_s:
        return False
    if reading.cause in (Cause.PEERS, Cause.IO, Cause.HUNG):
        return min(log_quiet, reading.for_s) >= settings.evidence_after_s
    return False


def _stalled(c: TickContext, phase: Phase, log_quiet: float, limit: StallLimit,
             reading: CauseReading | None) -> Raised:
    assert c.log is not None
    log = c.log
    parts = [
        f"no log progress for {duration(log_quiet)} in {phase} "
        f"(limit {duration(limit.seconds)}, {limit.source})",
        f"last line {quote(log.last_line)}",
        _step_evidence(log.phase_line, log.step_line, log.last_line),
        _process_evidence(c.process) if reading is None else "",
        _behind_evidence(c),
        _typical(c, phase),
    ]
    text = "; ".join(p for p in parts if p)
    step = nextstep.stall_step(c, limit.step, c.lagging)
    if reading is None:
        return Raised("stalled", text, step)
    cause = reading.cause
    evidence = f"{reading.evidence}; {text}{_stack_evidence(c)}"
    return Raised("stalled", evidence, reading.next_step or step, cause.value)


def _busy_flag(c: TickContext, phase: Phase, log_quiet: float, limit: StallLimit,
               reading: CauseReading) -> Raised:
    evidence = (
        f"{reading.evidence}; no log line for {duration(log_quiet)} in {phase} (limit "
        f"{duration(limit.seconds)}), but the processes are working{_stack_evidence(c)}"
    )
    return Raised(BUSY, evidence, reading.next_step, Cause.BUSY.value)


def _stack_evidence(c: TickContext) -> str:
    stacks = c.stacks
    if stacks is None:
        return ""
    return f"; stacks {duration(max(0.0, c.now - stacks.at))} ago: {clip(stacks.describe(), 600)}"


def _step_evidence(phase_line: str | None, step_line: str | None, last_line: str | None) -> str:
    """Where this phase and its current step began (when those are not the last line)."""
    parts = []
    if phase_line is not None and phase_line not in (step_line, last_line):
        parts.append(f"the phase began with {quote(phase_line)}")
    if step_line is not None and step_line != last_line:
        parts.append(f"the current step with {quote(step_line)}")
    return "; ".join(parts)


# Process states worth naming: a rank stuck in the GPU driver sits in disk-sleep ("D"),
# a process someone paused with SIGSTOP is "stopped".
_ODD_STATES = ("disk-sleep", "stopped", "tracing-stop", "dead", "zombie")


def _process_evidence(proc: ProcessReport | None) -> str:
    if proc is None or not proc.alive:
        return ""
    cpu = "CPU ?" if proc.cpu_percent is None else f"CPU {proc.cpu_percent:.0f}%"
    state = f" (state {proc.status})" if proc.status in _ODD_STATES else ""
    children = f", {len(proc.children)} children alive" if proc.children else ""
    return f"process {proc.pid} alive{state}, {cpu}{children}"


def _typical(c: TickContext, phase: Phase) -> str:
    typical = dict(c.expectations.expectation.typical_phase_s).get(phase)
    return f"{phase} usually takes {duration(typical)}" if typical is not None else ""


def _behind_evidence(c: TickContext) -> str:
    if not c.behind:
        return ""
    return "ranks behind: " + ", ".join(f"{rank} {where}" for rank, where in c.behind)


def degraded_flags(c: TickContext, phase: Phase) -> list[Raised]:
    """``degraded``: the server was ready and ``/health`` now fails or is slow."""
    latest = c.health.latest
    url_only_crash = phase == Phase.CRASHED and c.was_ready and c.process is None
    if latest is None or not (phase == Phase.DEGRADED or url_only_crash):
        return []
    since = duration(c.now - c.health.failing_since) if c.health.failing_since else "?"
    evidence = f"/health {latest.describe()} ({c.health.failures} bad probes in a row, for {since})"
    process = _process_evidence(c.process)
    text = f"{evidence}; {process}" if process else evidence
    return [Raised("degraded", text, nextstep.DEGRADED_STEP)]


def rank_flags(c: TickContext, phase: Phase) -> list[Raised]:
    """``rank_exited``: a scheduler child died while the main process lives."""
    proc = c.process
    if proc is None or not proc.alive or c.stopping or phase == Phase.CRASHED:
        return []  # once crashed, the children leaving are the crash, already told
    lost = [ch for ch in proc.children_lost if "sglang::" in ch.name or "scheduler" in ch.name]
    if not lost:
        return []
    names = ", ".join(f"PID {ch.pid} ({ch.name})" for ch in lost)
    evidence = f"{names} exited while PID {proc.pid} lives (in {phase})"
    return [Raised("rank_exited", evidence, nextstep.RANK_EXITED_STEP)]


def gpu_flags(c: TickContext, phase: Phase) -> list[Raised]:
    """``gpu_memory_held``: GPU memory held by a process that is not the server."""
    gpu, proc = c.gpu, c.process
    if gpu is None or not gpu.available or proc is None or not proc.alive:
        return []
    if not is_starting(phase):
        return []
    held = [
        f"GPU {d.index}: {(p.used_bytes or 0) / 2**30:.1f} GiB by PID {p.pid}"
        for d in gpu.devices
        for p in d.processes
        if p.pid not in proc.tree_pids and (p.used_bytes or 0) >= c.settings.gpu_held_min_bytes
    ]
    if not held:
        return []
    evidence = clip("; ".join(held), 300) + " (not the server)"
    if c.orphans is not None and c.orphans.orphans:
        evidence += "; " + _orphans_evidence(c.orphans)
        return [Raised("gpu_memory_held", evidence, _orphans_step(c.orphans))]
    return [Raised("gpu_memory_held", evidence, nextstep.GPU_HELD_STEP)]


def slow_flags(c: TickContext, phase: Phase, *, stalled: bool = False) -> list[Raised]:
    """``slow_startup``: still starting after the expected window (``stalled``: the stall
    flag is raised beside it, so its next step points there instead of predicting it)."""
    if c.elapsed_s is None or not (is_starting(phase) or phase == Phase.UNREACHABLE):
        return []
    if c.log is None and c.health.latest is None:
        return []  # no log and no /health answer yet: the phase is not known, only the age
    window = c.expectations.expectation
    if c.elapsed_s <= window.window_s:
        return []
    evidence = (
        f"{duration(c.elapsed_s)} since launch, expected within {duration(window.window_s)} "
        f"({window.source}); now in {phase}"
    )
    step = nextstep.SLOW_STALLED_STEP if stalled else nextstep.SLOW_STEP
    return [Raised("slow_startup", evidence, step)]

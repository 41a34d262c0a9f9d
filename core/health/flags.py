"""The flags of one tick, each with the evidence that raised it (README, Server view).

Every function returns ``(name, evidence)`` pairs; evidence quotes the log line, counts
the seconds without progress, or names the PID holding the port, so a reader at 2 a.m.
can act on it without opening another window.
"""

from __future__ import annotations

from eagle_tui.core.health.context import TickContext
from eagle_tui.core.health.phase import Phase, is_starting, startup_rank
from eagle_tui.core.proc.report import ProcessReport
from eagle_tui.core.text import clip, duration, quote

Raised = list[tuple[str, str]]

# When several fatal lines appear, the most specific names the cause.
FATAL_PRIORITY = (
    "oom",
    "nccl",
    "address_in_use",
    "port_in_use",
    "graph_capture_failed",
    "watchdog_timeout",
    "rank_died",
    "subprocess_crashed",
    "health_check_failed",
    "scheduler_exception",
    "init_failed",
    "child_failed",
)


def all_flags(c: TickContext, phase: Phase) -> Raised:
    """Every flag raised by this tick's evidence, most serious first."""
    return [
        *fatal_flags(c),
        *exit_flags(c, phase),
        *port_flags(c),
        *stall_flags(c, phase),
        *degraded_flags(c, phase),
        *rank_flags(c, phase),
        *gpu_flags(c, phase),
        *slow_flags(c, phase),
    ]


def fatal_flags(c: TickContext) -> Raised:
    """``fatal:<kind>`` per fatal log line, quoting it."""
    if c.log is None:
        return []
    order = {kind: i for i, kind in enumerate(FATAL_PRIORITY)}
    fatals = sorted(c.log.fatals, key=lambda f: order.get(f.event.kind, len(order)))
    raised = []
    for timed in fatals:
        event = timed.event
        evidence = f"log line {quote(event.line.text)}"
        if event.exit_code is not None:
            evidence += f"; exit code {event.exit_code}{_exit_hint(event.exit_code)}"
        if c.log.exception_line and event.kind in ("scheduler_exception", "child_failed"):
            evidence += f"; exception {quote(c.log.exception_line)}"
        raised.append((f"fatal:{event.kind}", evidence))
    return raised


def _exit_hint(code: int) -> str:
    return " (SIGKILL: often the kernel OOM killer; check dmesg)" if code == -9 else ""


def exit_flags(c: TickContext, phase: Phase) -> Raised:
    """``process_exited`` when the server process is gone, with how and what came last."""
    proc = c.process
    if proc is None or proc.alive:
        return []
    how = "was not found" if proc.status == "not-found" else proc.describe_exit()
    if phase == Phase.DOWN:
        return [("process_exited", f"PID {proc.pid} {how} after a shutdown request")]
    said = "no fatal line in the log" if c.log is not None and not c.log.fatals else ""
    if c.log is None:
        said = "no log to say why"
    last = _last_line_evidence(c)
    parts = [f"PID {proc.pid} {how}", said, last]
    return [("process_exited", "; ".join(p for p in parts if p))]


def _last_line_evidence(c: TickContext) -> str:
    if c.log is None or c.log.last_line_at is None:
        return ""
    age = duration(c.now - c.log.last_line_at)
    return f"last log line {age} ago: {quote(c.log.last_line)}"


def port_flags(c: TickContext) -> Raised:
    """``port_conflict``: the port is held by a process that is not the server."""
    port = c.port
    if port is not None and port.bound and port.held_by_server is False:
        server = f"the server (PID {c.process.pid})" if c.process is not None else "the server"
        evidence = (
            f"port {port.port} is held by {port.describe_holder()}, not by {server}; "
            "SGLang only finds out at bind time, after loading every weight"
        )
        return [("port_conflict", evidence)]
    if c.foreign_answer_suspected() and c.log is not None and c.health.latest is not None:
        evidence = (
            f"/health answered {c.health.latest.describe()} while the log shows "
            f"{c.log.phase}: another server holds the port"
        )
        return [("port_conflict", evidence)]
    return []


def stall_flags(c: TickContext, phase: Phase) -> Raised:
    """``stalled``: no log progress in a start-up phase for longer than its stall limit."""
    if c.log is None or not is_starting(phase):
        return []
    since = c.log.last_progress_at if c.log.last_progress_at is not None else c.watch_started
    silence = c.now - since
    limit = c.expectations.stall_limits.get(phase, c.settings.stall_limit(phase))
    if silence <= limit:
        return []
    source = c.expectations.stall_sources.get(phase, "default")
    parts = [
        f"no log progress for {duration(silence)} in {phase} (limit {duration(limit)}, {source})",
        f"last line {quote(c.log.last_line)}",
        _process_evidence(c.process),
        _laggard_ranks(c),
        _typical(c, phase),
    ]
    return [("stalled", "; ".join(p for p in parts if p))]


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


def _laggard_ranks(c: TickContext) -> str:
    if c.log is None or len(c.log.ranks) < 2:
        return ""
    furthest = max(startup_rank(p) for p in c.log.ranks.values())
    behind = sorted(f"{r} at {p}" for r, p in c.log.ranks.items() if startup_rank(p) < furthest)
    return f"ranks behind: {', '.join(behind)}" if behind else ""


def degraded_flags(c: TickContext, phase: Phase) -> Raised:
    """``degraded``: the server was ready and ``/health`` now fails or is slow."""
    latest = c.health.latest
    url_only_crash = phase == Phase.CRASHED and c.was_ready and c.process is None
    if latest is None or not (phase == Phase.DEGRADED or url_only_crash):
        return []
    since = duration(c.now - c.health.failing_since) if c.health.failing_since else "?"
    evidence = f"/health {latest.describe()} ({c.health.failures} bad probes in a row, for {since})"
    process = _process_evidence(c.process)
    return [("degraded", f"{evidence}; {process}" if process else evidence)]


def rank_flags(c: TickContext, phase: Phase) -> Raised:
    """``rank_exited``: a scheduler child died while the main process lives."""
    proc = c.process
    if proc is None or not proc.alive:
        return []
    lost = [ch for ch in proc.children_lost if "sglang::" in ch.name or "scheduler" in ch.name]
    if not lost:
        return []
    names = ", ".join(f"PID {ch.pid} ({ch.name})" for ch in lost)
    return [("rank_exited", f"{names} exited while PID {proc.pid} lives (in {phase})")]


def gpu_flags(c: TickContext, phase: Phase) -> Raised:
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
    return [("gpu_memory_held", clip("; ".join(held), 300) + " (not the server)")]


def slow_flags(c: TickContext, phase: Phase) -> Raised:
    """``slow_startup``: still starting after the expected window."""
    if c.elapsed_s is None or not (is_starting(phase) or phase == Phase.UNREACHABLE):
        return []
    window = c.expectations.expectation
    if c.elapsed_s <= window.window_s:
        return []
    evidence = (
        f"{duration(c.elapsed_s)} since launch, expected within {duration(window.window_s)} "
        f"({window.source}); now in {phase}"
    )
    return [("slow_startup", evidence)]

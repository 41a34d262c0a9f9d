"""Server snapshots as display text (pure: no widgets, no I/O).

Each function takes a ``HealthSnapshot`` and returns plain strings or meter values; the
card widget puts them on screen as literal text. ``ServerHistory`` keeps what a single
snapshot cannot say: the recent ``/health`` latencies and which flags are new.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from eagle_tui.core.health.phase import Phase, in_phase
from eagle_tui.core.text import clip, counted, duration, known
from eagle_tui.tui.render.meter import MeterValue, window_scale

if TYPE_CHECKING:
    from eagle_tui.core.health.snapshot import Flag, HealthSnapshot
    from eagle_tui.core.proc.report import GpuReport, PortStatus, ProcessReport

PhaseTone = Literal["ok", "busy", "warn", "bad"]

_TONES: dict[Phase, PhaseTone] = {
    Phase.READY: "ok",
    Phase.DEGRADED: "warn",
    Phase.STOPPING: "warn",
    Phase.CRASHED: "bad",
    Phase.DOWN: "bad",
    Phase.UNREACHABLE: "bad",
}
LATENCY_POINTS = 60


def phase_tone(phase: Phase) -> PhaseTone:
    """How a phase reads: ready ok, starting busy, degraded/stopping warn, down/crashed bad."""
    return _TONES.get(phase, "busy")


_ENDED = (Phase.CRASHED, Phase.DOWN)
SERVING = (Phase.READY, Phase.DEGRADED)


def phase_line(s: HealthSnapshot) -> str:
    """``● loading_weights  1m05s in phase  (elapsed 2m10s)``; once the process ended,
    ``● crashed 12s ago  (ran 1m08s, reached capturing_graphs)``."""
    if s.phase in _ENDED:
        text = f"● {s.phase.value} {duration(s.phase_s, '(when unknown)')} ago"
        if s.elapsed_s is not None:
            where = f", reached {s.reached.value}" if s.reached is not None else ""
            text += f"  (ran {duration(s.elapsed_s)}{where})"
        return text
    text = f"● {s.phase.value}  {in_phase(s.phase_s)}"
    if s.elapsed_s is not None:
        text += f"  (elapsed {duration(s.elapsed_s)})"
    return text


def window_meter(s: HealthSnapshot) -> MeterValue:
    """Elapsed start-up time against the expected window, the window marked."""
    exp = s.expected
    source = (exp.source if not exp.starts_recorded
              else counted(exp.starts_recorded, "earlier start"))
    took = s.ready_after_s
    if took is not None:  # frozen at readiness, however long it has served since
        label = f"ready after {duration(took)}; window {duration(exp.window_s)}"
        fill, marker = window_scale(took, exp.window_s)
        return MeterValue(fill, label, marker)
    if s.phase == Phase.READY:  # already up when the watch began: no time to show
        return MeterValue(0.0, f"ready; start-up not seen · window {duration(exp.window_s)}")
    label = f"{duration(s.elapsed_s)} of {duration(exp.window_s)} window · {source}"
    fill, marker = window_scale(s.elapsed_s, exp.window_s)
    return MeterValue(fill, label, marker)


def shards_meter(s: HealthSnapshot) -> MeterValue | None:
    """Checkpoint shards loaded, when the log has said anything about them."""
    p = s.progress
    if p.shards_total is None and p.shards_percent is None:
        return None
    percent = p.shards_percent if p.shards_percent is not None else 0
    label = f"shards {p.shards_done or 0}/{p.shards_total or '?'} ({percent}%)"
    return MeterValue(percent / 100.0, label)


SHORT_PHASE: dict[Phase, str] = {
    Phase.LAUNCHING: "launch",
    Phase.DISTRIBUTED_INIT: "dist",
    Phase.LOADING_WEIGHTS: "weights",
    Phase.ALLOCATING_KV: "kv",
    Phase.CAPTURING_GRAPHS: "graphs",
    Phase.WARMING_UP: "warmup",
}


def timeline_parts(s: HealthSnapshot) -> list[tuple[str, bool]]:
    """``(text, is_current)`` per phase so far: ``weights 1m40s (1m10s)``, the bracket
    holding the typical duration from earlier start-ups."""
    typical = dict(s.expected.typical_phase_s)
    parts = []
    for phase, seconds in s.phase_durations:
        text = f"{SHORT_PHASE.get(phase, phase.value)} {duration(seconds)}"
        if phase in typical:
            text += f" ({duration(typical[phase])})"
        parts.append((text, phase == s.phase))
    return parts


def process_text(process: ProcessReport | None) -> str:
    """``PID 1234 running, 3 children, cpu 12%`` or why there is none."""
    if process is None:
        return "no server process found"
    if not process.alive:
        return f"PID {process.pid} {process.describe_exit()}"
    text = f"PID {process.pid} {process.status}"
    if process.children:
        text += f", {len(process.children)} children"
    if process.children_lost:
        text += f", {len(process.children_lost)} lost"
    if process.cpu_percent is not None:
        text += f", cpu {process.cpu_percent:.0f}%"
    return text


def port_text(port: PortStatus | None) -> str:
    """``port 30000 listening`` / ``closed`` / ``held by PID 9 (…)``."""
    if port is None:
        return "port not probed"
    if not port.bound:
        return f"port {port.port} closed"
    if port.held_by_server is False:
        return f"port {port.port} held by {port.describe_holder()}"
    return f"port {port.port} listening"


def gpu_text(gpu: GpuReport | None) -> str:
    """``GPU0 12.3/80.0 GB  GPU1 …`` or why it is unknown."""
    if gpu is None:
        return "GPU: not probed"
    if not gpu.available:
        return "GPU n/a"
    return "  ".join(
        f"GPU{d.index} {d.used_bytes / 1e9:.1f}/{d.total_bytes / 1e9:.1f} GB" for d in gpu.devices
    )


def health_text(s: HealthSnapshot) -> str:
    """``/health 200 in 0.01 s`` (or what went wrong with the probe)."""
    if s.health is None:
        return "/health not polled yet"
    return f"/health {clip(s.health.describe(), 60)}"


def load_text(s: HealthSnapshot) -> str:
    """``running 4 · queued 0 · 1234 tok/s (metrics, 1s ago)`` while the figures are
    current; ``idle since 14:02:11`` once they expired (``—`` when not even that is
    known); "" before any."""
    load = s.load
    if load is None or s.phase not in SERVING:  # a server not serving has no load
        return ""
    if not load.current:
        return idle_text(load.idle_since)
    parts = [f"running {load.running}", *known(
        ("queued {}", load.queued), ("{:.0f} tok/s", load.throughput),
        ("KV {:.0%}", load.token_usage))]
    return " · ".join(parts) + f" ({load.source}, {duration(load.age_s)} ago)"


def idle_text(since: float | None) -> str:
    """``idle since 14:02:11`` (local time), or ``—`` when unknown."""
    if since is None:
        return "—"
    return "idle since " + time.strftime("%H:%M:%S", time.localtime(since))


def last_log_text(s: HealthSnapshot, limit: int = 200) -> str:
    """``last log 3 s ago: <line>`` (the line clipped, never interpreted)."""
    if s.last_log_line is None:
        return "no log line yet" if s.last_log_age_s is None else ""
    return f"last log {duration(s.last_log_age_s)} ago: {clip(s.last_log_line, limit)}"


def notes_text(s: HealthSnapshot) -> str:
    """Problems seeing the server, then notes, then the lines the parser did not read."""
    unknown: tuple[str, ...] = ()
    if s.unknown_lines:
        latest = f" (latest: {clip(s.unknown_samples[-1], 80)})" if s.unknown_samples else ""
        unknown = (f"{s.unknown_lines} log lines not recognised{latest}",)
    return "\n".join((*(f"problem: {p}" for p in s.problems), *s.notes, *unknown))


def flag_pairs(flags: Sequence[Flag]) -> tuple[tuple[str, str], ...]:
    """``(name, evidence)`` per flag (``stalled (hung)`` when the processes said why), the
    evidence followed by its next step."""
    return tuple(
        (
            f"{f.name} ({f.cause})" if f.cause and f.cause != f.name else f.name,
            f"{f.evidence}\n    next: {f.next_step}" if f.next_step else f.evidence,
        )
        for f in flags
    )


EVIDENCE_LINES = 6


def evidence_text(s: HealthSnapshot) -> str:
    """The processes and stacks behind a stall or busy flag (or stacks asked for with the
    Server view's key): one line per process, at most ``EVIDENCE_LINES``, then the stacks."""
    incident = s.busy is not None or s.flag("stalled") is not None
    if s.evidence is None or not (incident or s.stacks is not None):
        return ""
    said = {f"GPU: {note}" for note in s.notes}  # the card's notes already say why no GPU
    lines = [clip(line, 300) for line in s.evidence.describe() if line not in said]
    if s.busy is not None:
        lines.insert(0, f"busy (no stall): {clip(s.busy.evidence, 300)}")
    if len(lines) > EVIDENCE_LINES:
        lines = [*lines[: EVIDENCE_LINES - 1], f"… {len(lines) - EVIDENCE_LINES + 1} more"]
    if s.stacks is not None:
        lines.append(f"stacks: {clip(s.stacks.describe(), 400)}")
    return "\n".join(lines)


class ServerHistory:
    """What one server's snapshots add up to: latency history and newly raised flags."""

    def __init__(self, points: int = LATENCY_POINTS) -> None:
        self.latencies_ms: deque[float] = deque(maxlen=points)
        self.latest: HealthSnapshot | None = None
        self._probe_seq = -1
        self._flags: set[str] = set()

    def record(self, snapshot: HealthSnapshot) -> list[Flag]:
        """Take ``snapshot``; returns the flags that were not raised in the previous one."""
        probe = snapshot.health
        if probe is not None and probe.seq != self._probe_seq:
            self._probe_seq = probe.seq
            self.latencies_ms.append((probe.latency_s or 0.0) * 1000.0)
        new = [f for f in snapshot.flags if f.name not in self._flags]
        self._flags = {f.name for f in snapshot.flags}
        self.latest = snapshot
        return new

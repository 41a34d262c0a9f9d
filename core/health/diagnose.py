"""One look at a server, everything at once: the evidence bundle ``eagle-tui diagnose`` prints.

``collect(target)`` resolves which server is meant (a URL, a PID, a log, or the one SGLang
server on this host), watches it for two ticks (rates need two samples), takes every rank's
Python stack (py-spy), looks for leftover processes of earlier runs, and returns a
``Bundle``: phase and verdict, the log's last lines, each process's state, CPU, I/O, files
and wait, the stacks, the rendezvous peers, GPU processes, orphans and the server's
arguments. ``Bundle.lines()`` is text a person pastes into an issue, ``Bundle.as_json()``
the same as data; both pass every outside string through ``core.outside.clean`` (no
credentials, no query strings, no control or escape character).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_tui.core.clock import Clock, SystemClock
from eagle_tui.core.errors import NoServer, UnfitFile
from eagle_tui.core.fsio import read_tail
from eagle_tui.core.health.assemble import WatchOptions, build_watcher, is_local
from eagle_tui.core.health.cause import read_cause
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import HealthSnapshot
from eagle_tui.core.health.state import WatchState
from eagle_tui.core.health.watcher import Watcher
from eagle_tui.core.outside import clean, command_line
from eagle_tui.core.proc import procfs
from eagle_tui.core.proc.discover import (
    ServerProcess,
    discover_servers,
    find_server_pid,
    held_name,
    shown_log,
)
from eagle_tui.core.proc.evidence import TreeEvidence, held_for
from eagle_tui.core.proc.gpu import read_gpus
from eagle_tui.core.proc.orphans import OrphanReport, Watched, find_orphans
from eagle_tui.core.proc.probe import ProcessProbe
from eagle_tui.core.proc.report import GpuReport
from eagle_tui.core.proc.sampler import EvidenceSampler
from eagle_tui.core.proc.stacks import StackReport
from eagle_tui.core.serverlog.follower import LogFollower
from eagle_tui.core.text import clip, duration
from eagle_tui.core.urls import REDACTED, ServerURL, is_secret_name

LAST_LINES = 20
_TAIL_BYTES = 64 * 1024


@dataclass(frozen=True)
class Target:
    """What the user pointed at (any may be None; ``resolve`` fills the rest)."""

    url: ServerURL | None = None
    pid: int | None = None
    log: Path | None = None


@dataclass(frozen=True)
class Bundle:
    """Everything one look found (see the module docstring)."""

    target: Target
    snapshot: HealthSnapshot
    last_lines: tuple[str, ...]
    stacks: StackReport | None
    orphans: OrphanReport
    server_args: tuple[tuple[str, str], ...]
    command: str = ""
    notes: tuple[str, ...] = field(default=())

    def lines(self) -> list[str]:
        """The bundle as text, section by section."""
        s, t = self.snapshot, self.target
        out = ["== server"]
        out.append(f"url {t.url.public if t.url else '(none)'}; PID {t.pid or '?'}; "
                   f"log {shown_log(t.log)}")
        if self.command:
            out.append(f"command: {self.command}")
        out.append(f"phase {s.phase} for {duration(s.phase_s, 'an unknown time')}"
                   + (f"; step {s.step}" if s.step else "")
                   + (f"; elapsed {duration(s.elapsed_s)}" if s.elapsed_s is not None else ""))
        if s.verdict is not None:
            cause = f" ({s.verdict.cause})" if s.verdict.cause else ""
            out.append(f"verdict {s.verdict.outcome.value}{cause}: {s.verdict.diagnosis}")
        out += [f"flag {f.name}{f' ({f.cause})' if f.cause else ''}: {f.evidence}"
                + (f" | next: {f.next_step}" if f.next_step else "") for f in s.flags]
        out += [f"note: {n}" for n in (*s.notes, *self.notes)]
        out += [f"problem: {p}" for p in s.problems]
        out.append("== last log lines")
        out += list(self.last_lines) or ["(no log)"]
        out.append("== processes")
        reading = read_cause(s.evidence)
        if reading is not None:
            held = held_for(reading.for_s, reading.for_known).removeprefix(" for ")
            out.append(f"the processes say: {reading.cause}{f' ({held})' if held else ''}: "
                       f"{reading.evidence} | next: {reading.next_step}")
        out += s.evidence.describe() if s.evidence is not None else ["(no process evidence)"]
        out.append("== stacks (py-spy)")
        out += [f.describe() for f in self.stacks.folds] if self.stacks else ["(not taken)"]
        out += list(self.stacks.failures) if self.stacks else []
        out.append("== GPUs")
        out += _gpu_lines(s.gpu)
        out.append("== leftover processes of earlier runs")
        out += self.orphans.describe() + [f"problem: {p}" for p in self.orphans.problems]
        out.append("== server arguments")
        out += [f"{k} = {v}" for k, v in self.server_args] or ["(not in the log)"]
        return [clean(line) for line in out]

    def as_json(self) -> dict[str, Any]:
        """The bundle as data (the same content as ``lines``)."""
        s, ev = self.snapshot, self.snapshot.evidence
        data: dict[str, Any] = {
            "url": self.target.url.public if self.target.url else None,
            "pid": self.target.pid,
            "log": held_name(self.target.log) if self.target.log else None,
            "command": self.command or None,
            "phase": s.phase.value,
            "phase_s": None if s.phase_s is None else round(s.phase_s, 2),
            "step": s.step,
            "elapsed_s": None if s.elapsed_s is None else round(s.elapsed_s, 2),
            "verdict": None if s.verdict is None else {
                "outcome": s.verdict.outcome.value, "cause": s.verdict.cause or None,
                "diagnosis": s.verdict.diagnosis, "next_step": s.verdict.next_step},
            "flags": [{"flag": f.name, "cause": f.cause or None, "evidence": f.evidence,
                       "next_step": f.next_step} for f in s.flags],
            "notes": [*s.notes, *self.notes],
            "problems": list(s.problems),
            "last_lines": list(self.last_lines),
            "cause": _reading_json(ev),
            "processes": ev.describe() if ev is not None else [],
            "peers": ev.peers.describe() if ev is not None and ev.peers is not None else None,
            "stacks": [f.describe() for f in self.stacks.folds] if self.stacks else [],
            "stack_failures": list(self.stacks.failures) if self.stacks else [],
            "gpus": _gpu_lines(s.gpu),
            "orphans": [o.describe() for o in self.orphans.orphans],
            "orphans_stop_command": self.orphans.stop_command or None,
            "server_args": dict(self.server_args),
        }
        return {key: _redacted(value) for key, value in data.items()}


def resolve(target: Target) -> Target:
    """Fill in what the user did not give from the process table: the PID serving a local
    URL's port, the port and log of a PID, or the only SGLang server on this host."""
    if target.url is not None and target.pid is not None:
        return _with_log(target, None)
    servers = discover_servers()
    if target.pid is not None:
        found = next((s for s in servers if s.pid == target.pid), None)
        url = target.url or (_url_of(found) if found is not None else None)
        return _with_log(Target(url, target.pid, target.log), found)
    if target.url is not None:
        pid = _listener_of(target.url, servers)
        found = next((s for s in servers if s.pid == pid), None)
        return _with_log(Target(target.url, pid, target.log), found)
    if target.log is not None:
        return target
    if len(servers) == 1:
        return _with_log(Target(_url_of(servers[0]), servers[0].pid, None), servers[0])
    if not servers:
        raise NoServer("no SGLang server found on this host; pass --url, --pid or --log")
    listed = ", ".join(f"PID {s.pid} (port {s.port})" for s in servers[:5])
    raise NoServer(f"{len(servers)} servers on this host ({listed}); pick one with --pid")


def _listener_of(url: ServerURL, servers: list[ServerProcess]) -> int | None:
    """The server behind a local URL: the process listening on its port (a command line's
    ``--port`` is only a claim: ``find_server_pid``); for another host's URL, none here."""
    if not is_local(url):
        return None
    return find_server_pid(url.effective_port)


def _url_of(server: ServerProcess) -> ServerURL | None:
    return ServerURL.parse(f"http://127.0.0.1:{server.port}") if server.port else None


def _with_log(target: Target, found: ServerProcess | None) -> Target:
    if target.log is not None or found is None or found.log_path is None:
        return target
    return Target(target.url, target.pid, found.log_path)


async def collect(
    target: Target,
    *,
    clock: Clock | None = None,
    settings: WatchSettings | None = None,
    take_stacks: bool = True,
) -> Bundle:
    """Watch ``target`` for two ticks, take stacks and look for orphans (a few seconds)."""
    clock = clock or SystemClock()
    watcher = _watcher(target, clock, settings or WatchSettings())
    try:
        await watcher.tick(await_health=True)
        await clock.sleep(1.0)  # CPU and I/O rates need a second sample
        snapshot = await watcher.tick(await_health=True)
        if take_stacks and watcher.request_stacks():
            await watcher.wait_stacks()
            snapshot = await watcher.tick()
    finally:
        await watcher.aclose()
    watched = _watched(target, snapshot)
    orphans = find_orphans(watched, gpu=snapshot.gpu)
    log_state = watcher.state.log
    args = tuple(sorted(log_state.server_args.items())) if log_state is not None else ()
    return Bundle(
        target=target,
        snapshot=snapshot,
        last_lines=_tail(target.log),
        stacks=watcher.stacks,
        orphans=orphans,
        server_args=tuple((k, REDACTED if is_secret_name(k) else v) for k, v in args),
        command=_command(target.pid),
    )


def _watcher(target: Target, clock: Clock, settings: WatchSettings) -> Watcher:
    if target.url is not None:
        options = WatchOptions(url=target.url, log_path=target.log, pid=target.pid,
                               settings=settings, use_history=False)
        return build_watcher(options, clock=clock)
    log = LogFollower(target.log, from_start=True) if target.log is not None else None
    probe = ProcessProbe(target.pid) if target.pid is not None else None
    state = WatchState(settings, has_log=log is not None, has_process=probe is not None)
    return Watcher(
        state, clock=clock, log=log, probe=probe,
        gpu_reader=read_gpus if probe is not None else None,
        sampler_factory=EvidenceSampler if probe is not None else None,
    )  # fmt: skip


def _watched(target: Target, snapshot: HealthSnapshot) -> Watched:
    found = snapshot.process.pid if snapshot.process is not None else None
    roots = frozenset(p for p in (target.pid, found) if p is not None)
    ports = set()
    if target.url is not None:
        ports.add(target.url.effective_port)
    evidence = snapshot.evidence
    if evidence is not None and evidence.peers is not None:
        ports.add(evidence.peers.dist.port)
    return Watched(roots, frozenset(ports))


def _tail(path: Path | None, count: int = LAST_LINES) -> tuple[str, ...]:
    """The file's last ``count`` lines (a progress bar's ``\\r`` redraws: the last one):
    at most ``_TAIL_BYTES`` of a regular file (a FIFO or device is refused without
    blocking); a discovered server's log is ``/proc/PID/fd/N``, the file it holds."""
    if path is None:
        return ()
    try:
        data = read_tail(path, _TAIL_BYTES, "log").decode("utf-8", "replace")
    except OSError as exc:
        return (f"(cannot read {path}: {exc.strerror or exc})",)
    except UnfitFile as exc:
        return (f"(cannot read the log: {exc})",)
    lines = [line.rstrip("\r").rsplit("\r", 1)[-1] for line in data.split("\n")]
    return tuple(clip(line, 400) for line in lines if line.strip())[-count:]


def _command(pid: int | None) -> str:
    argv = procfs.read_argv(pid) if pid is not None else None
    return command_line(argv) if argv else ""


def _gpu_lines(gpu: GpuReport | None) -> list[str]:
    if gpu is None:
        return ["(not asked)"]
    if not gpu.available:
        return [gpu.reason or "no GPU information"]
    lines = []
    for device in gpu.devices:
        held = ", ".join(f"PID {p.pid} {(p.used_bytes or 0) / 2**30:.1f} GiB"
                         for p in device.processes)
        lines.append(f"GPU {device.index} {device.name}: {device.used_bytes / 2**30:.1f} of "
                     f"{device.total_bytes / 2**30:.1f} GiB" + (f"; {held}" if held else ""))
    return lines


def _reading_json(evidence: TreeEvidence | None) -> dict[str, Any] | None:
    reading = read_cause(evidence)
    if reading is None:
        return None
    known = reading.for_known  # a state held before the first look: only a lower bound
    return {"cause": reading.cause.key,
            "for_s": round(reading.for_s, 2) if known else None,
            "for_at_least_s": None if known else round(reading.for_s, 2),
            "evidence": reading.evidence, "next_step": reading.next_step, "pid": reading.pid}


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    return value

"""SGLang processes left over from an earlier run: what they hold and how to stop them.

A killed launcher normally takes its ranks with it (SGLang sets ``PR_SET_PDEATHSIG`` in
``kill_itself_when_parent_died``), but not always: a rank that was stopped, a child a rank
started, a launcher killed while its ranks were still forking, a container restart policy…
("the notorious orphan process problem", sglang PR #16756). The leftovers hold the port, the
distributed-init port or GPU memory, and the next start fails with ``rpc_port … is used by a
process already`` or an out-of-memory error.

An orphan here is a process titled ``sglang::…`` (or started as an SGLang server) that is
not in a live server's tree: no ancestor is a running server launcher (it was reparented to
PID 1 or a subreaper), or it is outside the watched server's tree and holds one of its
ports or GPU memory. Detection only: results are data, and ``stop_command`` is the
shell line a person (or the dashboard, later) runs.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import psutil

from eagle_tui.core.proc.discover import server_kind
from eagle_tui.core.proc.peers import read_listeners
from eagle_tui.core.proc.report import GpuReport
from eagle_tui.core.proc.titles import title_of
from eagle_tui.core.text import duration

_SGLANG_TITLES = ("sglang::", "sgl_diffusion::")


@dataclass(frozen=True)
class Watched:
    """What the live server we watch uses: its tree's root PIDs, its HTTP port, its
    distributed-init port. A process outside those trees holding these is in the way."""

    roots: frozenset[int] = frozenset()
    ports: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Orphan:
    """One leftover process."""

    pid: int
    ppid: int
    title: str
    state: str
    age_s: float
    user: str
    reasons: tuple[str, ...]
    ports: tuple[int, ...] = ()
    gpu_bytes: int | None = None
    rss_bytes: int | None = None

    def describe(self) -> str:
        """``PID 4242 sglang::scheduler_TP0, 2h03m old, stopped: its launcher is gone
        (parent PID 1); listens on 30000``."""
        parts = [f"PID {self.pid} {self.title}, {duration(self.age_s)} old, {self.state}"]
        text = ", ".join(parts) + ": " + "; ".join(self.reasons)
        if self.ports:
            text += "; listens on " + ", ".join(str(p) for p in self.ports)
        if self.gpu_bytes:
            text += f"; holds {self.gpu_bytes / 2**30:.1f} GiB of GPU memory"
        return text


@dataclass(frozen=True)
class OrphanReport:
    """Every orphan found and the line that stops them all (empty when none)."""

    orphans: tuple[Orphan, ...] = ()
    problems: tuple[str, ...] = field(default=())

    @property
    def stop_command(self) -> str:
        """``kill 4242 4243`` (SIGTERM; a stopped process gets SIGCONT after it, or the
        signal waits until it runs); ``kill -9 …`` is the next step if they stay."""
        if not self.orphans:
            return ""
        pids = " ".join(str(o.pid) for o in self.orphans)
        stopped = " ".join(
            str(o.pid) for o in self.orphans if o.state in ("stopped", "tracing stop")
        )
        line = f"kill {pids}"
        return line + (f" && kill -CONT {stopped}" if stopped else "")

    def describe(self) -> list[str]:
        """One line per orphan, then the command."""
        if not self.orphans:
            return ["no leftover SGLang processes"]
        lines = [o.describe() for o in self.orphans]
        lines.append(f"stop them: {self.stop_command} (then kill -9 any still alive after 15 s)")
        return lines


def find_orphans(
    watched: Watched | None = None,
    *,
    gpu: GpuReport | None = None,
    now: float | None = None,
) -> OrphanReport:
    """Scan the process table; never raises (what could not be read is a problem)."""
    watched = watched or Watched()
    try:
        table = {p.info["pid"]: p.info for p in psutil.process_iter(_FIELDS)}
    except (psutil.Error, OSError) as exc:
        return OrphanReport(problems=(f"process table unreadable: {exc}",))
    return orphans_in(
        table, watched, _gpu_holders(gpu), read_listeners(), time.time() if now is None else now
    )


_FIELDS = ["pid", "ppid", "cmdline", "name", "create_time", "status", "username"]


def orphans_in(
    table: Mapping[int, Mapping[str, Any]],
    watched: Watched,
    gpu_holders: Mapping[int, int],
    listeners: Mapping[int, int],
    now: float,
) -> OrphanReport:
    """The orphans of a process table (``pid`` → psutil ``info`` dict). Separated from the
    scan so the decision is tested on any table."""
    watched_tree = _descendants(table, watched.roots)
    found: list[Orphan] = []
    for pid, info in sorted(table.items()):
        argv = info.get("cmdline") or []
        title = title_of(argv, info.get("name") or "")
        sglang_title = title.startswith(_SGLANG_TITLES)
        if pid in watched_tree or not (sglang_title or server_kind(argv)):
            continue
        ports = _ports_of(pid, listeners)
        gpu_bytes = gpu_holders.get(pid)
        reasons = _reasons(pid, table, watched, sglang_title, ports, gpu_bytes)
        if reasons:
            found.append(_orphan(pid, info, title, now, reasons, ports, gpu_bytes))
    return OrphanReport(tuple(found))


def _reasons(
    pid: int,
    table: Mapping[int, Mapping[str, Any]],
    watched: Watched,
    sglang_title: bool,
    ports: tuple[int, ...],
    gpu_bytes: int | None,
) -> tuple[str, ...]:
    reasons: list[str] = []
    if sglang_title and not _has_live_launcher(pid, table):
        parent = table.get(pid, {}).get("ppid")
        reasons.append(f"its launcher is gone (parent PID {parent})")
    in_the_way = sorted(set(ports) & watched.ports)
    if in_the_way:
        reasons.append("holds the watched server's port " + ", ".join(map(str, in_the_way)))
    if gpu_bytes and watched.roots:
        reasons.append("holds GPU memory outside the watched server")
    return tuple(reasons)


def _orphan(
    pid: int,
    info: Mapping[str, Any],
    title: str,
    now: float,
    reasons: tuple[str, ...],
    ports: tuple[int, ...],
    gpu_bytes: int | None,
) -> Orphan:
    created = info.get("create_time") or now
    return Orphan(
        pid=pid,
        ppid=int(info.get("ppid") or 0),
        title=title,
        state=str(info.get("status") or "?").replace("tracing-stop", "tracing stop"),
        age_s=max(0.0, now - created),
        user=str(info.get("username") or "?"),
        reasons=reasons,
        ports=ports,
        gpu_bytes=gpu_bytes,
        rss_bytes=_rss(pid),
    )


def _has_live_launcher(pid: int, table: Mapping[int, Mapping[str, Any]]) -> bool:
    """An ancestor is a running server launcher (``python -m sglang.launch_server``…)."""
    seen: set[int] = set()
    parent = table.get(pid, {}).get("ppid")
    while parent and parent not in seen and parent in table:
        seen.add(parent)
        info = table[parent]
        if server_kind(info.get("cmdline") or []) is not None and info.get("status") != "zombie":
            return True
        parent = info.get("ppid")
    return False


def _descendants(table: Mapping[int, Mapping[str, Any]], roots: Collection[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, info in table.items():
        children.setdefault(int(info.get("ppid") or 0), []).append(pid)
    found, queue = set(roots), list(roots)
    while queue:
        for child in children.get(queue.pop(), ()):
            if child not in found:
                found.add(child)
                queue.append(child)
    return found


def _ports_of(pid: int, listeners: Mapping[int, int]) -> tuple[int, ...]:
    if not listeners:
        return ()
    ports: set[int] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return ()
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            port = listeners.get(int(target[8:-1]))
            if port is not None:
                ports.add(port)
    return tuple(sorted(ports))


def _gpu_holders(report: GpuReport | None) -> dict[int, int]:
    held: dict[int, int] = {}
    for device in report.devices if report is not None else ():
        for proc in device.processes:
            held[proc.pid] = held.get(proc.pid, 0) + (proc.used_bytes or 0)
    return held


def _rss(pid: int) -> int | None:
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except (psutil.Error, OSError):
        return None


def stop_orphans(report: OrphanReport, grace_s: float = 15.0) -> list[str]:
    """Stop every orphan of ``report``: SIGTERM (and SIGCONT to a stopped one, so it can act
    on it), then SIGKILL what is left after ``grace_s``. A PID whose process is no longer the
    one reported (gone, or reused by another program) is left alone. One line per process."""
    said: list[str] = []
    targets = []
    for orphan in report.orphans:
        try:
            proc = psutil.Process(orphan.pid)
            if title_of(proc.cmdline(), proc.name()) != orphan.title:
                said.append(f"PID {orphan.pid}: no longer {orphan.title}; left alone")
                continue
            proc.terminate()
            proc.resume()
            targets.append(proc)
        except psutil.NoSuchProcess:
            said.append(f"PID {orphan.pid}: already gone")
        except psutil.AccessDenied:
            said.append(f"PID {orphan.pid}: not ours to stop (run as its user or root)")
    _, alive = psutil.wait_procs(targets, timeout=grace_s)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    said += [f"PID {p.pid}: stopped" for p in targets if p not in alive]
    said += [f"PID {p.pid}: killed (SIGKILL after {grace_s:g} s)" for p in alive]
    return said

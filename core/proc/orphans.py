"""SGLang processes left over from an earlier run: what they hold and how to stop them.

A killed launcher normally takes its ranks with it (SGLang sets ``PR_SET_PDEATHSIG`` in
``kill_itself_when_parent_died``), but not always: a rank that was stopped, a child a rank
started, a launcher killed while its ranks were still forking, a container restart policy…
("the notorious orphan process problem", sglang PR #16756). The leftovers hold the port, the
distributed-init port or GPU memory, and the next start fails with ``rpc_port … is used by a
process already`` or an out-of-memory error.

A leftover here is a process titled ``sglang::…`` whose launcher is really gone: it was
re-parented to init or to a subreaper (its parent is PID 1, or a process in neither its
process group nor its session: one that adopted it, not one that started it), and no live
server is above it. Never a leftover: a server (started as one, ``core.proc.discover``:
``launch_server``, a router, the sim), anything in a live server's tree or the watched
server's tree, a process serving a port one of those listens on, a process whose parent
started it and is alive (a job script running ``sglang-router``), and a zombie (it holds
nothing; its parent reaps it). Each leftover names its owner: only the user's own are
offered for stopping, and every stop re-checks that the PID is still the same process
(start time, owner, title) at the moment of the kill.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shlex
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import psutil

from eagle_tui.core.proc import procfs
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
    """One leftover process. ``uid`` and ``start_ticks`` (its start after boot, in clock
    ticks) name it for good: a stop acts only on the process they still name."""

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
    uid: int | None = None
    start_ticks: int | None = None

    @property
    def mine(self) -> bool:
        """Owned by the user running eagle-tui (root included: another user's process is
        theirs, whoever looks)."""
        if self.uid is not None:
            return self.uid == os.getuid()
        return self.user == _user_name(os.getuid())

    @property
    def owner(self) -> str:
        """``owner ann`` (``owner ann, not yours: theirs to stop``)."""
        return f"owner {self.user}" + ("" if self.mine else ", not yours: theirs to stop")

    def describe(self) -> str:
        """``PID 4242 sglang::scheduler_TP0, owner ann, 2h03m old, stopped: its launcher is
        gone (re-parented to PID 1); listens on 30000``."""
        head = f"PID {self.pid} {self.title}, {self.owner}, {duration(self.age_s)} old"
        text = f"{head}, {self.state}: " + "; ".join(self.reasons)
        if self.ports:
            text += "; listens on " + ", ".join(str(p) for p in self.ports)
        if self.gpu_bytes:
            text += f"; holds {self.gpu_bytes / 2**30:.1f} GiB of GPU memory"
        return text


@dataclass(frozen=True)
class OrphanReport:
    """Every leftover found (the user's own and other users'), and the line that stops the
    user's own (empty when none)."""

    orphans: tuple[Orphan, ...] = ()
    problems: tuple[str, ...] = field(default=())

    @property
    def ours(self) -> tuple[Orphan, ...]:
        """The leftovers the user may be offered to stop: their own, not zombies."""
        return tuple(o for o in self.orphans if o.mine and o.state != "zombie")

    @property
    def theirs(self) -> tuple[Orphan, ...]:
        """Other users' leftovers: shown as theirs, never offered."""
        return tuple(o for o in self.orphans if not o.mine)

    @property
    def stop_command(self) -> str:
        """A shell line that stops the user's own leftovers, each only while its PID still
        names the process found: the same start time (``/proc/PID/stat`` field 22), owned by
        the user running it, under the same title. SIGTERM, then SIGCONT (a stopped process
        acts on the signal only once it runs); ``kill -9`` the same way is the next step."""
        return "; ".join(_guarded_kill(o) for o in self.ours)

    def step(self) -> str:
        """What to do about them: stop the user's own (the command), ask about the rest."""
        parts = []
        if self.ours:
            parts.append(f"stop your leftovers: {self.stop_command}")
        theirs = self.theirs
        if theirs:
            users = ", ".join(sorted({o.user for o in theirs}))
            parts.append(f"{len(theirs)} leftover(s) of other users ({users}): ask them "
                         "or the host's admin to stop them")
        return "; ".join(parts)

    def describe(self) -> list[str]:
        """One line per leftover, then what to do."""
        if not self.orphans:
            return ["no leftover SGLang processes"]
        lines = [o.describe() for o in self.orphans]
        if self.ours:
            lines.append(f"stop yours: {self.stop_command} (then the same with kill -9 for "
                         "any still alive after 15 s)")
        if self.theirs:
            users = ", ".join(sorted({o.user for o in self.theirs}))
            lines.append(f"not offered for stopping: {len(self.theirs)} of other users "
                         f"({users})")
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
        table = {p.info["pid"]: _with_groups(p.info) for p in psutil.process_iter(_FIELDS)}
    except (psutil.Error, OSError) as exc:
        return OrphanReport(problems=(f"process table unreadable: {exc}",))
    return orphans_in(
        table, watched, _gpu_holders(gpu), read_listeners(), time.time() if now is None else now
    )


_FIELDS = ["pid", "ppid", "cmdline", "name", "create_time", "status", "username", "uids"]


def _with_groups(info: dict[str, Any]) -> dict[str, Any]:
    """The info with the process group and session (who started it shares one of them)."""
    with contextlib.suppress(OSError):
        info["pgid"] = os.getpgid(info["pid"])
        info["sid"] = os.getsid(info["pid"])
    return info


def orphans_in(
    table: Mapping[int, Mapping[str, Any]],
    watched: Watched,
    gpu_holders: Mapping[int, int],
    listeners: Mapping[int, int],
    now: float,
) -> OrphanReport:
    """The leftovers of a process table (``pid`` → psutil ``info`` dict, with ``pgid`` and
    ``sid`` where known). Separated from the scan so the decision is tested on any table."""
    servers = {pid for pid, info in table.items()
               if server_kind(info.get("cmdline") or []) is not None and not _zombie(info)}
    serving = _descendants(table, servers | set(watched.roots))
    served_ports = {port for pid in servers | set(watched.roots)
                    for port in _ports_of(pid, listeners)}
    found: list[Orphan] = []
    for pid, info in sorted(table.items()):
        title = title_of(info.get("cmdline") or [], info.get("name") or "")
        if pid in serving or _zombie(info) or not title.startswith(_SGLANG_TITLES):
            continue
        ports = _ports_of(pid, listeners)
        gone = _launcher_gone(pid, table)
        if gone is None or served_ports.intersection(ports):
            continue  # a live parent started it, or it serves a live server's port
        gpu_bytes = gpu_holders.get(pid)
        reasons = (gone, *_holdings(watched, ports, gpu_bytes))
        found.append(_orphan(pid, info, title, now, reasons, ports, gpu_bytes))
    return OrphanReport(tuple(found))


def _zombie(info: Mapping[str, Any]) -> bool:
    return info.get("status") == "zombie"


def _launcher_gone(pid: int, table: Mapping[int, Mapping[str, Any]]) -> str | None:
    """Why ``pid``'s launcher is gone, or None when a live parent started it.

    The kernel does not record who started a process, so the parent is taken for its
    starter when it shares the process's group or session (a fork keeps both); PID 1, or a
    parent in neither, adopted it: a subreaper (``systemd --user``, a container's init,
    ``slurmstepd``). A titled child of a titled parent (a rank's helper) goes with it."""
    seen: set[int] = set()
    while pid not in seen:
        seen.add(pid)
        info = table.get(pid, {})
        parent = int(info.get("ppid") or 0)
        above = table.get(parent)
        if parent <= 1 or above is None:
            return f"its launcher is gone (re-parented to PID {parent})"
        if title_of(above.get("cmdline") or [], above.get("name") or "").startswith(
                _SGLANG_TITLES):
            pid = parent
            continue
        shares = any(info.get(key) is not None and info.get(key) == above.get(key)
                     for key in ("pgid", "sid"))
        if shares:
            return None
        name = above.get("name") or "?"
        return f"its launcher is gone (re-parented to PID {parent} {name}, a subreaper)"
    return None


def _holdings(watched: Watched, ports: tuple[int, ...], gpu_bytes: int | None) -> list[str]:
    reasons = []
    in_the_way = sorted(set(ports) & watched.ports)
    if in_the_way:
        reasons.append("holds the watched server's port " + ", ".join(map(str, in_the_way)))
    if gpu_bytes and watched.roots:
        reasons.append("holds GPU memory outside the watched server")
    return reasons


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
    uids = info.get("uids")
    stat = procfs.read_stat(pid)
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
        uid=int(uids.real) if uids is not None else info.get("uid"),
        start_ticks=stat.start_ticks if stat is not None else None,
    )


def _guarded_kill(orphan: Orphan) -> str:
    """``[ "$(cut -d' ' -f22 /proc/4242/stat)" = 67849 ] && [ -O /proc/4242 ] && grep -qzE
    '^sglang::scheduler_TP0( .*)?$' /proc/4242/cmdline && kill 4242 && kill -CONT 4242``
    (the title is the first word of the first argument: setproctitle may add more)."""
    proc = f"/proc/{orphan.pid}"
    title = shlex.quote("^" + re.sub(r"([.\[\]()*+?{}|^$\\])", r"\\\1", orphan.title)
                        + "( .*)?$")
    return (f"[ \"$(cut -d' ' -f22 {proc}/stat)\" = {orphan.start_ticks} ] && [ -O {proc} ] && "
            f"grep -qzE {title} {proc}/cmdline && kill {orphan.pid} && kill -CONT {orphan.pid}")


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


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


def still_the_same(orphan: Orphan) -> str | None:
    """Why ``orphan.pid`` no longer names the leftover found (None when it still does): read
    at the moment of a stop, so a PID reused since (even under the same title) is spared."""
    stat = procfs.read_stat(orphan.pid)
    if stat is None:
        return "already gone"
    if orphan.start_ticks is None or stat.start_ticks != orphan.start_ticks:
        return "a different process now (another start time); left alone"
    if stat.state == "Z":
        return "a zombie now (its parent reaps it); left alone"
    try:
        uid = os.stat(f"/proc/{orphan.pid}").st_uid
    except OSError:
        return "already gone"
    if uid != os.getuid() or not orphan.mine:
        return f"owned by {_user_name(uid)}, not you; left alone"
    argv = procfs.read_argv(orphan.pid)
    if title_of(argv, stat.comm) != orphan.title:
        return f"no longer {orphan.title}; left alone"
    return None


def stop_orphans(report: OrphanReport, grace_s: float = 15.0) -> list[str]:
    """Stop the user's own leftovers of ``report``: SIGTERM (and SIGCONT to a stopped one, so
    it can act on it), then SIGKILL what is left after ``grace_s``. Each is re-checked just
    before each signal (:func:`still_the_same`): a PID whose process is no longer the one
    reported (gone, reused, another owner, another title) is left alone; other users'
    leftovers are never signalled. One line per process."""
    said = [f"PID {o.pid}: owned by {o.user}, not yours; left alone" for o in report.theirs]
    targets: list[tuple[Orphan, Any]] = []
    for orphan in report.ours:
        why_not = still_the_same(orphan)
        if why_not is not None:
            said.append(f"PID {orphan.pid}: {why_not}")
            continue
        try:
            proc = psutil.Process(orphan.pid)
            proc.terminate()
            proc.resume()
            targets.append((orphan, proc))
        except psutil.NoSuchProcess:
            said.append(f"PID {orphan.pid}: already gone")
        except psutil.AccessDenied:
            said.append(f"PID {orphan.pid}: not ours to stop (run as its user or root)")
    _, alive = psutil.wait_procs([p for _, p in targets], timeout=grace_s)
    for orphan, proc in targets:
        if proc not in alive:
            said.append(f"PID {orphan.pid}: stopped")
            continue
        why_not = still_the_same(orphan)
        if why_not is None:
            with contextlib.suppress(psutil.Error):
                proc.kill()
            why_not = f"killed (SIGKILL after {grace_s:g} s)"
        said.append(f"PID {orphan.pid}: {why_not}")
    return said

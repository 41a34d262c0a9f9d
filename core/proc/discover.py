"""Find SGLang servers in the process table: what runs, on which port, logging where.

A server is recognised by how it was started, not by a word anywhere in its command line
(``eagle-tui watch --launch -- python -m sglang.launch_server …`` is not a server):
``python -m sglang.launch_server``, ``sglang serve``, the router (``python -m
sglang_router.launch_router``/``launch_server``, ``sglang-router``), and eagle-tui's
simulated server (``python -m eagle_tui.core.sim``, ``eagle-tui sim``). Its port comes from
``--port`` (SGLang's default 30000 otherwise) or, failing that, from what its process tree
listens on; its log is the file its own ``--log-file`` names, else where its stderr (else
stdout) points, when that is a regular file it holds open, and is read through that
descriptor (``/proc/PID/fd/N``: :func:`log_file_of`), never by re-resolving the path.

Processes are matched by their title too, because SGLang renames them with
``setproctitle``, which overwrites the command line: ``sglang-router`` 0.3.2's
``launch_router`` becomes ``sglang::router`` (a router; its ``--port`` is lost with its
arguments, so of the sockets it listens on the last one bound is taken: its Prometheus
exporter binds first), and a server's ranks become ``sglang::scheduler_TP0``,
``sglang::detokenizer``, ``sglang::data_parallel_controller`` (``core.proc.titles``). A rank
whose ancestors include no server known by its command line was started by some other
program (a script calling SGLang's ``launch_server``): that program, the nearest ancestor
without an SGLang title, is the server.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from eagle_tui.core.proc import procfs
from eagle_tui.core.proc.hostview import listening_inodes
from eagle_tui.core.proc.ports import InodeLookup, listener_pids
from eagle_tui.core.proc.titles import title_of
from eagle_tui.core.urls import ServerURL

_MODULE_KINDS = {
    "sglang.launch_server": "launch_server",
    "sglang.srt.entrypoints.http_server": "launch_server",
    "sglang_router.launch_router": "router",
    "sglang_router.launch_server": "router",
    "eagle_tui.core.sim": "sim",
}
_TITLE_KINDS = {"sglang::router": "router"}
_RANK_PREFIXES = ("sglang::", "sgl_diffusion::")
_SCRIPT_KINDS = {"sglang-router": "router", "sgl-router": "router", "launch_server.py": None}
_SUBCOMMAND_KINDS = {("sglang", "serve"): "serve", ("eagle-tui", "sim"): "sim"}
_OPTIONS_WITH_VALUE = frozenset({"-X", "-W", "-Q"})
_DEFAULT_PORT = 30000
_HELD = re.compile(r"/proc/(\d+)/fd/(\d+)")


@dataclass(frozen=True)
class ServerProcess:
    """One server found in the process table."""

    pid: int
    kind: str
    cmdline: str
    host: str
    port: int | None
    log_path: Path | None
    create_time: float
    uid: int | None = None
    """The process's real user id (None when the process table would not say)."""

    @property
    def mine(self) -> bool:
        """Started by the user running eagle-tui (another user's server is theirs to act on)."""
        return self.uid is None or self.uid == os.getuid()

    @property
    def url(self) -> ServerURL | None:
        """``http://HOST:PORT`` (a wildcard host is reached on the loopback)."""
        if self.port is None:
            return None
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return ServerURL("http", host, self.port)


def server_kind(argv: Sequence[str]) -> str | None:
    """What kind of server ``argv`` starts (``launch_server``, ``serve``, ``router``,
    ``sim``), or None when it is not one."""
    if not argv:
        return None
    titled = _TITLE_KINDS.get(title_of(argv, ""))
    if titled is not None:
        return titled
    exe = os.path.basename(argv[0])
    rest = list(argv[1:])
    if exe.startswith("python"):
        index = 0
        while index < len(rest) and rest[index].startswith("-") and rest[index] != "-m":
            index += 2 if rest[index] in _OPTIONS_WITH_VALUE else 1
        if index + 1 < len(rest) and rest[index] == "-m":
            return _MODULE_KINDS.get(rest[index + 1])
        if index >= len(rest):
            return None
        exe, rest = os.path.basename(rest[index]), rest[index + 1 :]
    if exe == "launch_server.py" and any("sglang" in part for part in argv[:3]):
        return "launch_server"
    if exe in _SCRIPT_KINDS:
        return _SCRIPT_KINDS[exe]
    verb = next((part for part in rest if not part.startswith("-")), None)
    return _SUBCOMMAND_KINDS.get((exe, verb or ""))


def _flag(argv: Sequence[str], name: str) -> str | None:
    for index, part in enumerate(argv):
        if part == name and index + 1 < len(argv):
            return argv[index + 1]
        if part.startswith(name + "="):
            return part.split("=", 1)[1]
    return None


def port_from_argv(argv: Sequence[str]) -> int | None:
    """``--port N`` (or ``--port=N``) of a command line."""
    value = _flag(argv, "--port")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def mentions_port(argv: Sequence[str], port: int) -> bool:
    """True when the command line says ``--port PORT``."""
    return re.search(rf"--port(?:=|\s+){port}\b", " ".join(argv)) is not None


def log_file_of(pid: int, argv: Sequence[str] = ()) -> Path | None:
    """Where the process's log is read: ``/proc/PID/fd/N``, a regular file it holds open.

    The server's own ``--log-file`` when its command line names one and it holds that file
    open, else its stderr (else stdout) when that is a regular file. The log is always read
    through the descriptor (the kernel opens the very file the process holds), never by
    the path the link shows: that path belongs to whoever owns its directory, who may have
    made it a link to a file only root can read, a FIFO or ``/dev/zero`` since. Another
    user's descriptors are only visible to root (ptrace rules), so their log, too, is only
    ever read this way. :func:`shown_log` gives the path for people.
    """
    for fd in _held_log_file(pid, argv), 2, 1:
        if fd is not None and _is_regular(held := Path(f"/proc/{pid}/fd/{fd}")):
            return held
    return None


def _held_log_file(pid: int, argv: Sequence[str]) -> int | None:
    """The descriptor of the file ``--log-file`` names, if the process holds it open."""
    named = _flag(argv, "--log-file")
    if not named:
        return None
    cwd = _cwd_of(pid)
    if cwd is None and not named.startswith("/"):
        return None
    wanted = os.path.normpath(os.path.join(cwd or "/", named))
    for fd in procfs.list_fds(pid) or ():
        target = procfs.fd_target(pid, fd)
        if target is not None and target.removesuffix(" (deleted)") == wanted:
            return fd
    return None


def _cwd_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def _is_regular(held: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(held).st_mode)  # the held file itself (a magic link)
    except OSError:
        return False


def shown_log(path: Path | None) -> str:
    """A log path for people: ``/srv/x.log (read through /proc/12/fd/2)`` for a held one."""
    if path is None:
        return "(none)"
    named = held_name(path)
    return str(path) if named == str(path) else f"{named} (read through {path})"


def held_name(path: Path) -> str:
    """The path the kernel shows for a held log (``/proc/PID/fd/N``), else ``path``: a
    name for people and JSON, never opened."""
    match = _HELD.fullmatch(str(path))
    target = procfs.fd_target(int(match[1]), int(match[2])) if match else None
    return target if target is not None else str(path)


def _listening_ports(proc: Any) -> list[int]:
    ports: list[int] = []
    with contextlib.suppress(psutil.Error):
        for member in [proc, *proc.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                for conn in member.net_connections(kind="tcp"):
                    if conn.status == psutil.CONN_LISTEN and conn.laddr:
                        ports.append(int(conn.laddr.port))
    return sorted(set(ports))


def _last_bound_port(proc: Any) -> int | None:
    """The port of the process's own listening socket with the highest descriptor."""
    with contextlib.suppress(psutil.Error):
        listening = [(conn.fd, int(conn.laddr.port)) for conn in proc.net_connections(kind="tcp")
                     if conn.status == psutil.CONN_LISTEN and conn.laddr]
        if listening:
            return max(listening)[1]
    return None


def _port_of(proc: Any, argv: Sequence[str], kind: str) -> int | None:
    port = port_from_argv(argv)
    if port is not None:
        return port
    listening = _listening_ports(proc)
    if _DEFAULT_PORT in listening or (kind in ("launch_server", "serve") and not listening):
        return _DEFAULT_PORT
    if title_of(argv, "") in _TITLE_KINDS:  # arguments overwritten: see the module docstring
        return _last_bound_port(proc) or (listening[0] if listening else None)
    return listening[0] if listening else None


def self_and_ancestors() -> set[int]:
    """This process and its parents (never reported as servers: we may have launched them)."""
    pids = {os.getpid()}
    with contextlib.suppress(psutil.Error):
        pids.update(p.pid for p in psutil.Process().parents())
    return pids


def process_tree(root: int) -> set[int]:
    """``root`` and every process under it (empty once ``root`` is gone)."""
    try:
        top = psutil.Process(root)
        return {root, *(child.pid for child in top.children(recursive=True))}
    except psutil.Error:
        return set()


def _candidates(within: int | None = None) -> Iterable[Any]:
    ourselves = self_and_ancestors()
    scope = process_tree(within) if within is not None else None
    table = {proc.info["pid"]: proc for proc in
             psutil.process_iter(["pid", "cmdline", "create_time", "ppid", "uids"])}
    found: dict[int, tuple[Any, list[str], str, bool]] = {}
    for pid, proc in table.items():
        argv = proc.info.get("cmdline") or []
        kind = server_kind(argv)
        if kind is not None:
            found[pid] = (proc, argv, kind, False)
    for proc in table.values():
        launcher = _launcher_of_rank(proc, table, found)
        if launcher is not None:
            found[launcher.info["pid"]] = (launcher, launcher.info.get("cmdline") or [],
                                           "launch_server", True)
    for pid, candidate in found.items():
        if pid not in ourselves and (scope is None or pid in scope):
            yield candidate


def _launcher_of_rank(proc: Any, table: dict[int, Any],
                      known: dict[int, tuple[Any, list[str], str, bool]]) -> Any | None:
    """For a process with an SGLang rank title whose ancestors include no known server:
    the nearest ancestor without such a title (the program that started the server)."""
    title = title_of(proc.info.get("cmdline") or [], "")
    if not title.startswith(_RANK_PREFIXES) or title in _TITLE_KINDS or proc.info["pid"] in known:
        return None  # not a rank (a router is a server itself)
    launcher, seen = None, set()
    parent = table.get(proc.info.get("ppid"))
    while parent is not None and parent.info["pid"] not in seen:
        pid = parent.info["pid"]
        seen.add(pid)
        if pid in known:
            return None
        title = title_of(parent.info.get("cmdline") or [], "")
        if launcher is None and not title.startswith(_RANK_PREFIXES) and pid > 1:
            launcher = parent
        parent = table.get(parent.info.get("ppid"))
    return launcher


def discover_servers(within: int | None = None) -> list[ServerProcess]:
    """Every SGLang server (and eagle-tui sim) running here, oldest first; never raises.

    ``within`` narrows the search to the process tree under that PID: test processes that
    run side by side each look only at the servers they started themselves.
    """
    found: list[ServerProcess] = []
    try:
        candidates = list(_candidates(within))
    except (psutil.Error, OSError):
        return []
    # Only a server known by its own command line or title hides the servers it started:
    # a program found through its ranks' titles may be anything (a shell, a test runner).
    pids = {proc.info["pid"] for proc, _, _, inferred in candidates if not inferred}
    for proc, argv, kind, _ in candidates:
        if proc.info.get("ppid") in pids:
            continue  # a server started by another server we list (the router's workers)
        found.append(
            ServerProcess(
                pid=proc.info["pid"],
                kind=kind,
                cmdline=" ".join(argv),
                host=_flag(argv, "--host") or "127.0.0.1",
                port=_port_of(proc, argv, kind),
                log_path=log_file_of(proc.info["pid"], argv),
                create_time=proc.info.get("create_time") or 0.0,
                uid=_real_uid(proc),
            )
        )
    return sorted(found, key=lambda s: (s.create_time, s.pid))


def _real_uid(proc: Any) -> int | None:
    uids = proc.info.get("uids")
    return int(uids.real) if uids is not None else None


def find_server_pid(port: int, hint: Iterable[int] = (),
                    inodes_of: InodeLookup = listening_inodes) -> int | None:
    """The server behind ``port``: the process the kernel says listens on it (its socket
    table, ``core.proc.ports``) when that is a server or part of one (then the server it
    belongs to); None when something listens that we cannot see (another user's process,
    read without root).

    A command line is only a claim: anyone can start a process that says ``--port PORT``
    and listen nowhere. So another user's claim never counts, and the user's own (the
    newest: during a restart the old server may still be alive, and the one being watched is
    the one that just started) stands only for a server that has not bound its port yet
    (SGLang binds it last, after loading): when nothing listens, when a non-server holds
    the port (a leftover rank), or when it started after the server that listens (a new
    start-up that will meet the holder at bind time: the port conflict to report while it
    loads). With neither, the listener itself.

    ``hint``: PIDs to look among first (the tree watched so far: the whole host's
    descriptors are read only when none of them listens); ``inodes_of``: the listening
    sockets (a watcher's shared ``HostLook``).
    """
    try:
        bound, holders = listener_pids(port, hint, inodes_of)
        servers = {proc.info["pid"]: proc for proc, _, _, _ in _candidates()}
    except (psutil.Error, OSError):
        return None
    if bound and not holders:
        return None
    claimant = _newest_claimant(port, servers.values())
    listening = next((s for s in (_server_above(h, servers) for h in holders) if s), None)
    if listening is not None and (claimant is None or not _started_after(
            servers[claimant], servers[listening])):
        return listening
    return claimant if claimant is not None else (holders[0] if holders else None)


def _started_after(proc: Any, other: Any) -> bool:
    """``proc`` started after ``other`` and is not part of it."""
    if proc.info["pid"] == other.info["pid"]:
        return False
    with contextlib.suppress(psutil.Error):
        if other.info["pid"] in {p.pid for p in proc.parents()}:
            return False
    return bool((proc.info.get("create_time") or 0.0) > (other.info.get("create_time") or 0.0))


def _server_above(pid: int, servers: dict[int, Any]) -> int | None:
    """``pid`` when it is a server, else its nearest ancestor that is one; None for a
    process that belongs to no server."""
    with contextlib.suppress(psutil.Error):
        for proc in [psutil.Process(pid), *psutil.Process(pid).parents()]:
            if proc.pid in servers:
                return int(proc.pid)
    return None


def _newest_claimant(port: int, servers: Iterable[Any]) -> int | None:
    best: tuple[float, int] | None = None
    for proc in servers:
        argv = proc.info.get("cmdline") or []
        if not mentions_port(argv, port) or _real_uid(proc) not in (None, os.getuid()):
            continue
        key = (proc.info.get("create_time") or 0.0, proc.info["pid"])
        if best is None or key > best:
            best = key
    return None if best is None else best[1]

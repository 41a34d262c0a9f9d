"""Who is listening on a TCP port (any address, IPv4 or IPv6).

On Linux the listening sockets are read from ``/proc/net/tcp{,6}`` first and only their
inodes are looked up among processes' file descriptors (the server's own tree first): a
host with thousands of connections (a busy inference node) costs a watcher a millisecond
per look, not the full connection table psutil would build; the table is read once for
every watcher in the process (``core.proc.hostview``). Elsewhere, psutil.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

import psutil

from eagle_tui.core.outside import clean, command_line
from eagle_tui.core.proc.hostview import listening_inodes
from eagle_tui.core.proc.report import PortStatus

InodeLookup = Callable[[int], "set[int] | None"]


def _pids_holding(inodes: set[int], hint: Iterable[int]) -> list[int]:
    """Processes with one of ``inodes`` among their descriptors (``hint`` PIDs first)."""
    wanted = {f"socket:[{inode}]" for inode in inodes}
    hinted = list(dict.fromkeys(hint))
    found = [pid for pid in hinted if _holds(pid, wanted)]
    if found:
        return found
    others = (int(name) for name in os.listdir("/proc") if name.isdigit())
    return [pid for pid in others if pid not in hinted and _holds(pid, wanted)]


def _holds(pid: int, wanted: set[str]) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") in wanted:
                return True
    return False


def _listener_pids_psutil(port: int) -> tuple[bool, list[int]]:
    listeners: list[Any] = [
        conn
        for conn in psutil.net_connections(kind="tcp")
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port
    ]
    return bool(listeners), [c.pid for c in listeners if c.pid is not None]


def listener_pids(port: int, hint: Iterable[int] = (),
                  inodes_of: InodeLookup = listening_inodes) -> tuple[bool, list[int]]:
    """(anything listening on ``port``, the PIDs seen holding it); ``inodes_of`` reads the
    listening sockets (a watcher passes its ``HostLook``'s, shared with other watchers)."""
    inodes = inodes_of(port) if sys.platform == "linux" else None
    if inodes is None:
        return _listener_pids_psutil(port)
    if not inodes:
        return False, []
    return True, _pids_holding(inodes, hint)


def _describe(pid: int) -> tuple[str, str]:
    try:
        proc = psutil.Process(pid)
        return clean(proc.name()), command_line(proc.cmdline())
    except (psutil.Error, OSError):
        return "", ""


def port_status(port: int, server_pids: frozenset[int] | None = None,
                inodes_of: InodeLookup = listening_inodes) -> PortStatus:
    """Who holds ``port``; ``server_pids`` (the watched tree) decides ``held_by_server``.

    Raises ``psutil.Error``/``OSError`` when the connection table cannot be read; the
    probe turns that into a reported problem.
    """
    bound, pids = listener_pids(port, server_pids or (), inodes_of)
    if not bound:
        return PortStatus(port=port, bound=False)
    if not pids:
        return PortStatus(port=port, bound=True)
    # Prefer a holder outside the server tree: that is the one worth reporting.
    foreign = [p for p in pids if server_pids is None or p not in server_pids]
    holder = foreign[0] if foreign else pids[0]
    name, cmdline = _describe(holder)
    held = None if server_pids is None else holder in server_pids
    return PortStatus(port, True, holder, name, cmdline, held)

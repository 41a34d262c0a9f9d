"""Who is listening on a TCP port (any address, IPv4 or IPv6)."""

from __future__ import annotations

from typing import Any

import psutil

from eagle_tui.core.proc.report import PortStatus


def _listeners(port: int) -> list[Any]:
    return [
        conn
        for conn in psutil.net_connections(kind="tcp")
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port
    ]


def _describe(pid: int) -> tuple[str, str]:
    try:
        proc = psutil.Process(pid)
        return proc.name(), " ".join(proc.cmdline())
    except (psutil.Error, OSError):
        return "", ""


def port_status(port: int, server_pids: frozenset[int] | None = None) -> PortStatus:
    """Who holds ``port``; ``server_pids`` (the watched tree) decides ``held_by_server``.

    Raises ``psutil.Error``/``OSError`` when the connection table cannot be read; the
    probe turns that into a reported problem.
    """
    listeners = _listeners(port)
    if not listeners:
        return PortStatus(port=port, bound=False)
    pids = [c.pid for c in listeners if c.pid is not None]
    if not pids:
        return PortStatus(port=port, bound=True)
    # Prefer a holder outside the server tree: that is the one worth reporting.
    foreign = [p for p in pids if server_pids is None or p not in server_pids]
    holder = foreign[0] if foreign else pids[0]
    name, cmdline = _describe(holder)
    held = None if server_pids is None else holder in server_pids
    return PortStatus(port, True, holder, name, cmdline, held)

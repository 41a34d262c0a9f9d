"""Host-wide reads shared by every watcher in the process: who listens on which port, and
which process is whose parent.

A watcher asks two questions each tick that only a scan of the whole host answers: who
listens on its server's port (all of ``/proc/net/tcp``) and which processes are its
server's children (the parent of every process). With 64 servers on one host, 64 watchers
each scanning the whole host every second cost the dashboard 1.4 cores of its one Python
core, and its screen froze. A watcher's look (:class:`HostLook`) now reuses a scan another
watcher took since its own previous look, when younger than :data:`FRESH_S`: never older
than what it saw before, and about 4 scans a second instead of 64.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from eagle_tui.core.proc import procfs

FRESH_S = 0.25
"""How old a shared scan may be when a watcher asks (a watcher ticks once a second)."""

_LISTEN = "0A"
_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")

Scan = TypeVar("Scan")


class SharedScan(Generic[Scan]):
    """``read()``'s result, shared between threads (each watcher runs in its own): a caller
    gets the kept scan only when it was taken after the caller's previous look and is
    younger than ``fresh_s``; else it is read again. A read that raises is not kept."""

    def __init__(self, read: Callable[[], Scan], fresh_s: float = FRESH_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._read = read
        self._fresh_s = fresh_s
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: tuple[Scan, float] | None = None

    def get(self, after: float) -> tuple[Scan, float]:
        """The scan and when it was taken, taken later than ``after``."""
        with self._lock:
            now = self._clock()
            kept = self._kept
            if kept is None or kept[1] <= after or now - kept[1] >= self._fresh_s:
                kept = self._kept = (self._read(), now)
            return kept


def read_listening() -> Mapping[int, frozenset[int]] | None:
    """Port → inodes of the sockets listening on it; None when /proc cannot be read."""
    found: dict[int, set[int]] = {}
    read_any = False
    for table in _TABLES:
        try:
            with open(table, encoding="ascii") as handle:
                next(handle, None)  # the header
                read_any = True
                for row in handle:
                    fields = row.split()
                    if len(fields) < 10 or fields[3] != _LISTEN:
                        continue
                    port = int(fields[1].rsplit(":", 1)[1], 16)
                    found.setdefault(port, set()).add(int(fields[9]))
        except (OSError, ValueError, IndexError):
            continue
    return {port: frozenset(inodes) for port, inodes in found.items()} if read_any else None


def read_children() -> Mapping[int, tuple[int, ...]]:
    """Parent PID → its children's PIDs, for every process this user can see."""
    children: dict[int, list[int]] = {}
    for pid in procfs.list_pids():
        stat = procfs.read_stat(pid)
        if stat is not None:
            children.setdefault(stat.ppid, []).append(pid)
    return {parent: tuple(pids) for parent, pids in children.items()}


Listening = Mapping[int, frozenset[int]] | None
Children = Mapping[int, tuple[int, ...]]
LISTENING: SharedScan[Listening] = SharedScan(read_listening)
CHILDREN: SharedScan[Children] = SharedScan(read_children)


class HostLook:
    """One watcher's looks at the shared scans: each look sees the host as of a moment after
    its previous one (or its creation), so a lone watcher reads every time, as before; the
    watchers that looked since share the scan."""

    def __init__(self, listening: SharedScan[Listening] | None = None,
                 children: SharedScan[Children] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._listening = listening or LISTENING
        self._children = children or CHILDREN
        born = clock()  # a scan taken before this watcher began says nothing of its server
        self._listening_at = born
        self._children_at = born

    def listening_inodes(self, port: int) -> set[int] | None:
        """Inodes of sockets listening on ``port``; None when /proc cannot be read."""
        table, self._listening_at = self._listening.get(self._listening_at)
        return None if table is None else set(table.get(port, ()))

    def descendants(self, pid: int) -> list[int]:
        """Every process below ``pid``, parents before their children."""
        table, self._children_at = self._children.get(self._children_at)
        found: list[int] = []
        pending = list(table.get(pid, ()))
        while pending:
            child = pending.pop(0)
            if child not in found:
                found.append(child)
                pending.extend(table.get(child, ()))
        return found


def listening_inodes(port: int) -> set[int] | None:
    """Inodes of sockets listening on ``port``, read now (no sharing)."""
    table = read_listening()
    return None if table is None else set(table.get(port, ()))

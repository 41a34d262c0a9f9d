"""Why a start-up makes no progress, from its processes (``core.proc`` evidence).

``read_cause(tree)`` says which of five things the server tree is doing, with the evidence a
person would quote and how long it has held:

- ``stopped``: a process of the tree is stopped (SIGSTOP, a debugger): it names the process;
- ``waiting for peers``: node 0's rendezvous store has k of N ranks and is missing other
  nodes' ranks, or this node cannot reach the store;
- ``blocked on I/O``: a process in uninterruptible disk wait, blocked in a call on a file (a
  named pipe nobody writes, a dead network mount), or reading a weight file that moved no
  byte, while the tree is otherwise quiet: it names the file;
- ``busy``: a compiler child or a rank burns CPU, or weight reads move bytes: the start-up is
  alive though it prints nothing (a 15-minute JIT compile is no hang);
- ``hung``: none of those, and every process of the tree is quiet (no CPU, no bytes).

The watcher (``core.health.flags``) decides *when* these become a verdict; this module only
reads the evidence. docs/startup-diagnosis.md, "Verdicts from the evidence".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from eagle_tui.core.proc.evidence import (
    FileEvidence,
    FileKind,
    ProcessEvidence,
    State,
    TreeEvidence,
    byte_rate,
    held_for,
)
from eagle_tui.core.proc.titles import Kind
from eagle_tui.core.text import duration

# A process counts as working above this CPU (cores) or these bytes per second; an idle
# SGLang rank runs its watchdog and tqdm threads at ~0.02 CPU/s (recorded, real 0.5.23).
BUSY_CPU = 0.2
RUNNABLE_CPU = 0.05
BUSY_BYTES_PER_S = 64 * 1024
_FILE_CALLS = frozenset({
    "open", "openat", "openat2", "read", "pread64", "readv", "preadv", "flock", "fcntl",
})  # fmt: skip


class Cause(StrEnum):
    """What the processes say about a silent start-up."""

    STOPPED = "stopped"
    PEERS = "waiting for peers"
    IO = "blocked on I/O"
    BUSY = "busy"
    HUNG = "hung"

    @property
    def key(self) -> str:
        """The name in ``--json`` (``waiting_for_peers``)."""
        return {"waiting for peers": "waiting_for_peers", "blocked on I/O": "blocked_on_io"}.get(
            self.value, self.value
        )


@dataclass(frozen=True)
class CauseReading:
    """One reading: the cause, its evidence (quotable), how long it has held, what to do;
    ``pid`` is the process it concerns (for ``py-spy dump --pid``)."""

    cause: Cause
    evidence: str
    for_s: float
    next_step: str
    pid: int | None = None
    for_known: bool = True  # False: it already held at the first look (``for_s`` a lower bound)


def read_cause(tree: TreeEvidence | None) -> CauseReading | None:
    """The cause the tree shows now; None without evidence (no process, first sample)."""
    if tree is None or not tree.alive or not tree.processes:
        return None
    if all(p.cpu_per_s is None for p in tree.processes):
        return None  # the first sample has no rates yet
    for reader in (_stopped, _peers, _io, _busy):
        found = reader(tree)
        if found is not None:
            return found
    return _hung(tree)


def _stopped(tree: TreeEvidence) -> CauseReading | None:
    stopped = tree.in_state(State.STOPPED, State.TRACING_STOP)
    if not stopped:
        return None
    first = max(stopped, key=lambda p: p.state_s)
    traced = first.state is State.TRACING_STOP
    how = "held by a tracer (a debugger or py-spy)" if traced else "stopped by a signal"
    evidence = f"{first.label} (PID {first.pid}) {how}{held_for(first.state_s, first.state_known)}"
    others = [p.label for p in stopped if p is not first]
    if others:
        evidence += "; also stopped: " + ", ".join(others)
    step = (
        f"detach the debugger from PID {first.pid}"
        if traced
        else f"resume it with kill -CONT {first.pid} (or find who sent SIGSTOP)"
    )
    return CauseReading(Cause.STOPPED, evidence, first.state_s, step, first.pid,
                        first.state_known)


def _peers(tree: TreeEvidence) -> CauseReading | None:
    peers = tree.peers
    if peers is None:
        return None
    waiting = (
        (peers.hosts_store and bool(peers.missing))
        or (not peers.hosts_store and not peers.connected)
        or (peers.foreign_listener and not peers.hosts_store)
    )
    if not waiting or _working(tree):
        return None
    ranks = tree.ranks or tree.processes
    quietest = min(ranks, key=lambda p: p.quiet_s)
    quiet = quietest.quiet_s
    missing = peers.missing_nodes()
    nodes = ", ".join(str(n) for n in missing) if missing else "the other nodes"
    step = (
        f"start node(s) {nodes} with --dist-init-addr {peers.dist.address} and their own "
        f"--node-rank, and check that they reach {peers.dist.address} (firewall, interface)"
    )
    pid = ranks[0].pid
    return CauseReading(Cause.PEERS, peers.describe(), quiet, step, pid, quietest.quiet_known)


def _io(tree: TreeEvidence) -> CauseReading | None:
    if _working(tree):
        return None
    for proc in tree.processes:
        if proc.state is State.DISK_WAIT:
            return _io_reading(proc, proc.state_s, _waited_file(proc) or "the disk",
                               proc.state_known)
        call = proc.blocked
        on_file = call is not None and call.path is not None and call.path.startswith("/")
        if call is not None and call.path and on_file and call.syscall in _FILE_CALLS:
            return _io_reading(proc, call.since_s, call.path, call.since_known)
        if call is not None and call.disk_wait:
            where = call.path or _waited_file(proc) or "the disk"
            return _io_reading(proc, call.since_s, where, call.since_known)
    for proc in tree.ranks:
        for item in proc.files:
            if _read_stands(item):
                return _io_reading(proc, min(item.still_s, proc.quiet_s), item.path,
                                   proc.quiet_known and item.still_known)
    return None


def _read_stands(item: FileEvidence) -> bool:
    """A weight file open for reading whose position stands short of its end."""
    if item.kind is not FileKind.WEIGHTS or item.fd is None or item.bytes_per_s != 0:
        return False
    return item.position is not None and bool(item.size) and item.position < (item.size or 0)


def _waited_file(proc: ProcessEvidence) -> str | None:
    stuck = [f for f in proc.files if f.fd is not None and f.bytes_per_s == 0]
    return stuck[0].path if stuck else None


def _io_reading(proc: ProcessEvidence, for_s: float, path: str, known: bool) -> CauseReading:
    name = path.rsplit("/", 1)[-1] if path.startswith("/") else path
    evidence = f"{name}: {proc.describe()}"
    step = (
        f"check what serves {path} (a named pipe, a network mount, the disk: "
        f"try `head -c 1 {path}`), then py-spy dump --pid {proc.pid}"
    )
    return CauseReading(Cause.IO, evidence, for_s, step, proc.pid, known)


def _working(tree: TreeEvidence) -> ProcessEvidence | None:
    """The process doing the most work, if any works: compilers first, then CPU, then bytes."""
    busy = [p for p in tree.processes if _is_busy(p)]
    if not busy:
        return None
    return max(busy, key=lambda p: (p.role.kind is Kind.COMPILER, p.cpu_per_s or 0.0))


def _is_busy(proc: ProcessEvidence) -> bool:
    """Working: a live compiler child (on a loaded host a compile gets a fraction of a core,
    and it never idles), a process burning CPU (or runnable and using some: the share a
    busy process gets shrinks with the host's load), or one moving bytes."""
    if proc.state in (State.STOPPED, State.TRACING_STOP, State.ZOMBIE, State.DEAD):
        return False
    cpu = proc.cpu_per_s or 0.0
    if proc.role.kind is Kind.COMPILER or cpu >= BUSY_CPU:
        return True
    if proc.state is State.RUNNING and cpu >= RUNNABLE_CPU:
        return True
    moved = max(proc.read_per_s or 0.0, proc.disk_read_per_s or 0.0)
    return moved >= BUSY_BYTES_PER_S


def _busy(tree: TreeEvidence) -> CauseReading | None:
    worker = _working(tree)
    if worker is None:
        return None
    compilers = [p for p in tree.compilers if _is_busy(p)]
    if compilers:
        names = ", ".join(
            f"{p.label} (PID {p.pid}) {p.cpu_per_s or 0:.2f} CPU/s for {duration(p.age_s)}"
            for p in compilers[:3]
        )
        evidence = f"compiling: {names}"
    else:
        evidence = f"working: {worker.describe()}"
        reads = [f for f in worker.files if f.kind is FileKind.WEIGHTS and f.bytes_per_s]
        if reads:
            evidence = f"reading weights at {byte_rate(reads[0].bytes_per_s or 0)}: " + (
                worker.describe()
            )
    step = f"wait: it is working (py-spy dump --pid {worker.pid} shows where)"
    return CauseReading(Cause.BUSY, evidence, 0.0, step, worker.pid)


def _hung(tree: TreeEvidence) -> CauseReading:
    ranks = tree.ranks or tree.processes
    quietest = min(tree.processes, key=lambda p: p.quiet_s)
    shown = "; ".join(p.describe() for p in ranks[:4])
    more = f"; {len(ranks) - 4} more ranks alike" if len(ranks) > 4 else ""
    evidence = f"every process quiet (no CPU, no I/O, no compiler): {shown}{more}"
    pid = ranks[0].pid
    return CauseReading(Cause.HUNG, evidence, quietest.quiet_s, f"py-spy dump --pid {pid}",
                        pid, quietest.quiet_known)

"""Sample a server's whole process tree every tick: states, CPU, I/O, files, waits, peers.

``EvidenceSampler(root_pid).sample(now)`` returns an immutable
:class:`~eagle_tui.core.proc.evidence.TreeEvidence` whose rates are computed against the
previous sample, so the caller owns the clock and the cadence (the watcher's 1 s tick).
It is built to be cheap enough to run every second on a 16-process tree
(``tests/benchmarks/bench_evidence.py``): one ``/proc`` listing a sample, ``stat`` only of
processes not seen before (for their parent) and of the tree, descriptor targets
remembered between samples (:mod:`files`), ``/proc/PID/maps`` and the wait of a process
only while it is quiet, the connection table only when there is a distributed-init address,
NVML only every few samples.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from eagle_tui.core.outside import clean
from eagle_tui.core.proc import blocked, procfs
from eagle_tui.core.proc.evidence import (
    BlockedCall,
    FileEvidence,
    ProcessEvidence,
    State,
    TreeEvidence,
    state_of,
)
from eagle_tui.core.proc.files import FileTracker, MappedFiles
from eagle_tui.core.proc.gpu import read_gpus
from eagle_tui.core.proc.peers import DistInit, PeerEvidence, peer_evidence, read_tcp_table
from eagle_tui.core.proc.report import GpuReport
from eagle_tui.core.proc.titles import Kind, Role, role_of

GpuReader = Callable[[], GpuReport]

_PAGE = 4096


@dataclass(frozen=True)
class SamplerSettings:
    """Thresholds and cadences.

    A process is *quiet* while it uses under ``quiet_cpu`` cores and moves under
    ``quiet_bytes_per_s`` (an idle or hung SGLang rank still runs its watchdog and tqdm
    monitor threads and reads a few bytes of eventfd now and then). The wait of a process
    is looked at unless it burns ``busy_cpu`` cores or more.
    Command lines are read again every ``refresh_every`` samples, the targets of sockets,
    pipes and devices every ``fds_every`` (files are checked every sample); NVML is asked
    every ``gpu_every`` samples; a quiet rank's mapped weight files are read at most every
    ``maps_every_s`` seconds, and all the threads of a quiet process every
    ``threads_every_s`` seconds (in between, only the thread found); the connection table
    (its cost grows with every TCP socket on the host) every ``peers_every`` samples.
    """

    quiet_cpu: float = 0.1
    busy_cpu: float = 0.5
    quiet_bytes_per_s: float = 4096.0
    refresh_every: int = 5
    fds_every: int = 30
    gpu_every: int = 5
    maps_every_s: float = 10.0
    threads_every_s: float = 5.0
    peers_every: int = 5


@dataclass
class _Tracked:
    """What the sampler remembers of one process between samples."""

    start_ticks: int
    argv: list[str] | None
    comm: str
    role: Role
    files: FileTracker
    mapped: MappedFiles
    cpu_ticks: int = 0
    io: procfs.IoCounters | None = None
    major_faults: int = 0
    quiet_since: float | None = None
    state: str = ""
    state_since: float = 0.0
    wait: blocked.Blocked | None = None
    wait_since: float = 0.0
    threads_at: float | None = None
    looks: int = 0
    # When the sampler first saw the process, first had its rates, first looked at its
    # wait: a state already held then began before we looked (its duration is unknown).
    first_look: float | None = None
    rated_at: float | None = None
    wait_first: float | None = None
    born_seen: bool = False  # first looked at within ``_BORN_SLACK_S`` of its start


@dataclass
class _Table:
    """Parent of every PID on the host: ``stat`` is read only for PIDs not seen before, and
    the children map is rebuilt only when the table changed."""

    parents: dict[int, int] = field(default_factory=dict)
    _children: dict[int, list[int]] | None = None

    def refresh(self, pids: list[int]) -> None:
        current = set(pids)
        gone = self.parents.keys() - current
        new = current - self.parents.keys()
        for pid in gone:
            del self.parents[pid]
        for pid in new:
            stat = procfs.read_stat(pid)
            if stat is not None:
                self.parents[pid] = stat.ppid
        if gone or new:
            self._children = None

    def reparented(self, pid: int, ppid: int) -> None:
        """A tree member's fresh ``stat`` names another parent (its parent died)."""
        if self.parents.get(pid, ppid) != ppid:
            self.parents[pid] = ppid
            self._children = None

    def children(self) -> dict[int, list[int]]:
        if self._children is None:
            found: dict[int, list[int]] = {}
            for pid, parent in self.parents.items():
                found.setdefault(parent, []).append(pid)
            self._children = found
        return self._children


class EvidenceSampler:
    """Evidence for the tree rooted at ``root_pid`` (the ``launch_server`` process).

    ``dist`` is the distributed-init rendezvous; by default it is read from the root's
    command line (``--dist-init-addr``, ``--nnodes``, ``--node-rank``, ``--tp``). ``gpu``
    reads NVML (``core.proc.gpu.read_gpus``: without a driver it says so, cheaply); None
    skips GPUs.
    """

    def __init__(
        self,
        root_pid: int,
        *,
        dist: DistInit | None = None,
        gpu: GpuReader | None = read_gpus,
        settings: SamplerSettings | None = None,
    ) -> None:
        self.root_pid = root_pid
        self.settings = settings or SamplerSettings()
        self._gpu = gpu
        self._table = _Table()
        self._tracked: dict[int, _Tracked] = {}
        self._root_start: int | None = None
        self._previous_at: float | None = None
        self._samples = 0
        self._gpu_bytes: dict[int, int] = {}
        self._gpu_state: tuple[bool, str] = (False, "")
        self._peers: PeerEvidence | None = None
        argv = procfs.read_argv(root_pid) or []
        self.dist = dist if dist is not None else DistInit.from_argv(argv)

    def use_dist(self, dist: DistInit) -> None:
        """Read the rendezvous at ``dist`` from now on (the log's ``server_args`` say more
        than the command line); the next sample reads the connection table afresh."""
        if dist != self.dist:
            self.dist, self._peers = dist, None

    def sample(self, now: float) -> TreeEvidence:
        """The tree now; ``now`` is the caller's monotonic clock in seconds."""
        interval = None if self._previous_at is None else max(1e-6, now - self._previous_at)
        self._previous_at = now
        self._samples += 1
        root = procfs.read_stat(self.root_pid)
        if self._root_start is None and root is not None:
            self._root_start = root.start_ticks
        if root is None or root.start_ticks != self._root_start or root.state in "ZX":
            return TreeEvidence(now, self.root_pid, alive=False, interval_s=interval)
        self._table.refresh(procfs.list_pids())
        uptime = _boot_seconds()
        self._read_gpus()
        processes: list[ProcessEvidence] = []
        problems: list[str] = []
        for pid, depth in self._walk():
            stat = root if pid == self.root_pid else procfs.read_stat(pid)
            if stat is None:
                continue
            self._table.reparented(pid, stat.ppid)
            processes.append(self._process(stat, depth, now, interval, uptime))
        self._forget({p.pid for p in processes})
        processes.sort(key=lambda p: (p.role.sort_key, p.pid))
        hidden = [p.label for p in processes if not p.files_visible]
        if hidden:
            problems.append(
                "descriptors hidden (not our processes; run as the server's user or root): "
                + ", ".join(hidden)
            )
        return TreeEvidence(
            at=now,
            root_pid=self.root_pid,
            alive=True,
            interval_s=interval,
            processes=tuple(processes),
            peers=self._read_peers(),
            gpu_available=self._gpu_state[0],
            gpu_reason=self._gpu_state[1],
            problems=tuple(problems),
        )

    def _walk(self) -> list[tuple[int, int]]:
        children = self._table.children()
        order, queue = [], [(self.root_pid, 0)]
        seen = {self.root_pid}
        while queue:
            pid, depth = queue.pop(0)
            order.append((pid, depth))
            for child in sorted(children.get(pid, ())):
                if child not in seen:
                    seen.add(child)
                    queue.append((child, depth + 1))
        return order

    def _track(self, stat: procfs.Stat) -> tuple[_Tracked, bool]:
        """The process's memory (new for a PID not seen, or reused), and whether it is new."""
        tracked = self._tracked.get(stat.pid)
        is_root = stat.pid == self.root_pid
        if tracked is not None and tracked.start_ticks == stat.start_ticks:
            if tracked.looks % self.settings.refresh_every == 0 or stat.comm != tracked.comm:
                tracked.argv, tracked.comm = procfs.read_argv(stat.pid), stat.comm
                tracked.role = role_of(tracked.argv, stat.comm, is_root=is_root)
            return tracked, False
        argv = procfs.read_argv(stat.pid)
        tracked = _Tracked(
            start_ticks=stat.start_ticks,
            argv=argv,
            comm=stat.comm,
            role=role_of(argv, stat.comm, is_root=is_root),
            files=FileTracker(stat.pid, refresh_every=self.settings.fds_every),
            mapped=MappedFiles(stat.pid, every_s=self.settings.maps_every_s),
            cpu_ticks=stat.cpu_ticks,
            major_faults=stat.major_faults,
        )
        self._tracked[stat.pid] = tracked
        return tracked, True

    def _process(
        self, stat: procfs.Stat, depth: int, now: float, interval: float | None, uptime: float
    ) -> ProcessEvidence:
        tracked, fresh = self._track(stat)
        tracked.looks += 1
        rate = None if fresh or interval is None else interval
        if tracked.first_look is None:
            tracked.first_look = now
            tracked.born_seen = uptime - stat.start_ticks / procfs.CLOCK_TICKS <= _BORN_SLACK_S
        if rate is not None and tracked.rated_at is None:
            tracked.rated_at = now
        io = procfs.read_io(stat.pid)
        cpu = (
            None
            if rate is None
            else (stat.cpu_ticks - tracked.cpu_ticks) / procfs.CLOCK_TICKS / rate
        )
        reads, writes, disk = _io_rates(io, tracked.io, rate)
        faults = None if rate is None else (stat.major_faults - tracked.major_faults) / rate
        tracked.cpu_ticks, tracked.io, tracked.major_faults = stat.cpu_ticks, io, stat.major_faults
        quiet = self._quiet(cpu, reads, writes, disk)
        if not quiet or tracked.quiet_since is None:
            tracked.quiet_since = None if not quiet else now
        state = state_of(stat.state)
        if stat.state != tracked.state:
            tracked.state, tracked.state_since = stat.state, now
        files = tracked.files.sample(now, rate)
        mapped: tuple[FileEvidence, ...] = ()
        if tracked.role.kind is Kind.SCHEDULER:
            mapped = tracked.mapped.sample(now, wanted=quiet or state is State.DISK_WAIT)
        # a hung rank still runs a watchdog and a tqdm monitor thread, and its main thread
        # may be the one running at the instant we look: look unless it burns a core
        waiting = state is not State.ZOMBIE and (cpu is None or cpu < self.settings.busy_cpu)
        return ProcessEvidence(
            pid=stat.pid,
            ppid=stat.ppid,
            depth=depth,
            role=tracked.role,
            comm=clean(stat.comm),  # anyone sets a name (a write to /proc/self/comm)
            state=state,
            age_s=max(0.0, uptime - stat.start_ticks / procfs.CLOCK_TICKS),
            cpu_s=stat.cpu_ticks / procfs.CLOCK_TICKS,
            cpu_per_s=cpu,
            read_per_s=reads,
            write_per_s=writes,
            disk_read_per_s=disk,
            major_faults_per_s=faults,
            quiet_s=0.0 if tracked.quiet_since is None else now - tracked.quiet_since,
            state_s=now - tracked.state_since,
            quiet_known=_began_after(tracked.quiet_since, tracked.rated_at),
            state_known=tracked.born_seen or _began_after(tracked.state_since,
                                                          tracked.first_look),
            rss_bytes=stat.rss_pages * _PAGE,
            threads=stat.threads,
            files=(files or ()) + mapped,
            files_visible=files is not None,
            blocked=self._blocked(tracked, stat.pid, now) if waiting else None,
            gpu_bytes=self._gpu_bytes.get(stat.pid),
        )

    def _quiet(self, cpu: float | None, *rates: float | None) -> bool:
        if cpu is None or cpu >= self.settings.quiet_cpu:
            return False
        return all(r is None or r < self.settings.quiet_bytes_per_s for r in rates)

    def _blocked(self, tracked: _Tracked, pid: int, now: float) -> BlockedCall | None:
        every = self.settings.threads_every_s
        previous = tracked.wait
        if tracked.threads_at is None or now - tracked.threads_at >= every:
            tracked.threads_at = now
            seen = blocked.look_threads(pid)
        elif previous is not None:
            seen = blocked.again(pid, previous) or blocked.look(pid)
        else:
            seen = blocked.look(pid)
        tracked.wait = seen
        tracked.wait_first = now if tracked.wait_first is None else tracked.wait_first
        if seen is None:
            return None
        if previous is None or seen.key != previous.key:
            tracked.wait_since = now
        tid = seen.tid if seen.tid != pid else None
        return BlockedCall(seen.syscall, seen.wchan, seen.path, now - tracked.wait_since,
                           seen.meaning, seen.thread, seen.disk_wait, tid,
                           since_known=_began_after(tracked.wait_since, tracked.wait_first))

    def _forget(self, alive: set[int]) -> None:
        for pid in [p for p in self._tracked if p not in alive]:
            del self._tracked[pid]

    def _read_gpus(self) -> None:
        if self._gpu is None or (self._samples - 1) % self.settings.gpu_every:
            return
        report = self._gpu()
        self._gpu_state = (report.available, report.reason)
        held: dict[int, int] = {}
        for device in report.devices:
            for proc in device.processes:
                held[proc.pid] = held.get(proc.pid, 0) + (proc.used_bytes or 0)
        self._gpu_bytes = held

    def _read_peers(self) -> PeerEvidence | None:
        if self.dist is None:
            return None
        if self._peers is not None and (self._samples - 1) % self.settings.peers_every:
            return self._peers
        sockets: set[int] = set()
        for tracked in self._tracked.values():
            sockets |= tracked.files.sockets
        self._peers = peer_evidence(self.dist, read_tcp_table(self.dist.port), sockets)
        return self._peers


def _io_rates(
    now: procfs.IoCounters | None, before: procfs.IoCounters | None, interval: float | None
) -> tuple[float | None, float | None, float | None]:
    """(rchar, wchar, read_bytes) per second."""
    if now is None or before is None or interval is None:
        return None, None, None
    return (
        max(0.0, (now.rchar - before.rchar) / interval),
        max(0.0, (now.wchar - before.wchar) / interval),
        max(0.0, (now.read_bytes - before.read_bytes) / interval),
    )


def _boot_seconds() -> float:
    """Seconds since boot, the clock process start times are counted on."""
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):  # not Linux
        text = procfs.read_text(f"{procfs.PROC}/uptime", 128) or "0"
        return float(text.split()[0])


_BORN_SLACK_S = 2.0
"""A process first looked at this soon after its start was watched (near enough) all its
life: a state it already held then is timed from that look, off by at most this."""


def _began_after(since: float | None, first: float | None) -> bool:
    """A state that began after the sampler's first look at it: its duration is known."""
    return since is not None and first is not None and since > first

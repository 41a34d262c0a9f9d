"""What a server's processes show at one moment: immutable results of one evidence sample.

A :class:`TreeEvidence` holds one :class:`ProcessEvidence` per process of the tree
(launcher, scheduler ranks, detokenizer, their children), the distributed-init peers
(:mod:`eagle_tui.core.proc.peers`) and what the GPUs said. Rates are per second over the
interval since the previous sample (None on the first); ``*_s`` durations come from the
sampler's history: a state already held at its first look has lasted at least that long
(``*_known`` False), never "for 1s". Nothing here judges: a verdict reads these fields and quotes
``describe()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from eagle_tui.core.outside import clean
from eagle_tui.core.proc.peers import PeerEvidence
from eagle_tui.core.proc.titles import Kind, Role
from eagle_tui.core.text import duration

AT_LEAST_SHOWN_S = 10.0
"""A state already held when the sampler first looked lasted longer than it has seen: below
this it says nothing of how long (a one-look ``diagnose`` sees it for a few seconds; a
watch calls a stopped rank after ``stopped_after_s``, 10 s, of it)."""


def held_for(seconds: float, known: bool, sep: str = "") -> str:
    """`` for 40s`` when known; `` for at least 40s`` for a state held since the first look
    (a lower bound), nothing when that bound is short."""
    if known:
        return f"{sep} for {duration(seconds)}"
    if seconds >= AT_LEAST_SHOWN_S:
        return f"{sep} for at least {duration(seconds)}"
    return ""


class State(StrEnum):
    """The scheduler state of a process (the letter of ``/proc/PID/stat``)."""

    RUNNING = "running"
    SLEEPING = "sleeping"
    DISK_WAIT = "disk wait"
    STOPPED = "stopped"
    TRACING_STOP = "tracing stop"
    ZOMBIE = "zombie"
    DEAD = "dead"
    IDLE = "idle"
    OTHER = "other"


_STATES = {
    "R": State.RUNNING,
    "S": State.SLEEPING,
    "D": State.DISK_WAIT,
    "T": State.STOPPED,
    "t": State.TRACING_STOP,
    "Z": State.ZOMBIE,
    "X": State.DEAD,
    "x": State.DEAD,
    "I": State.IDLE,
}


def state_of(letter: str) -> State:
    """``State`` for a ``/proc/PID/stat`` state letter."""
    return _STATES.get(letter, State.OTHER)


class FileKind(StrEnum):
    """Why an open file is evidence."""

    WEIGHTS = "weights"
    CACHE = "cache"
    LOCK = "lock"
    LARGE = "large file"


@dataclass(frozen=True)
class FileEvidence:
    """A weight, cache or lock file a process has open (``fd``) or mapped (``fd`` None).

    ``position`` is the descriptor's offset (``/proc/PID/fdinfo``); a mapped file has none,
    its reading shows in the process's ``disk_read_per_s`` and ``major_faults_per_s``.
    ``still_s`` is how long the position has not moved (0 when it moved since the last
    sample); for a mapped file, how long it has been seen mapped.
    """

    path: str
    kind: FileKind
    fd: int | None
    size: int | None
    position: int | None
    bytes_per_s: float | None
    still_s: float
    writable: bool = False
    still_known: bool = True  # False: already so at the first look (``still_s`` a lower bound)

    @property
    def name(self) -> str:
        """The file's base name (``model-00012-of-00064.safetensors``)."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def percent(self) -> float | None:
        """How far into the file the position is, 0-100; None when unknown."""
        if self.position is None or not self.size:
            return None
        return min(100.0, 100.0 * self.position / self.size)

    def describe(self) -> str:
        """``reading model-00012-of-00064.safetensors, 37 %, 0 B/s for 50 s``."""
        if self.fd is None:
            size = f" ({byte_size(self.size)})" if self.size else ""
            held = held_for(self.still_s, self.still_known).removeprefix(" for ")
            return f"has {self.name}{size} mapped" + (f" ({held})" if held else "")
        verb = {FileKind.LOCK: "holds", FileKind.CACHE: "has"}.get(self.kind, "reading")
        if self.writable and self.kind is not FileKind.LOCK:
            verb = "writing"
        text = f"{verb} {self.name}"
        if self.percent is not None and not self.writable:
            text += f", {self.percent:.0f} %"
        if self.bytes_per_s is not None:
            text += f", {byte_rate(self.bytes_per_s)}"
            if self.bytes_per_s == 0 and self.still_s > 0:
                text += held_for(self.still_s, self.still_known)
        return text


@dataclass(frozen=True)
class BlockedCall:
    """Where a quiet process waits: the system call of its most telling thread and the
    kernel function that thread is parked in.

    ``path`` is the file the call concerns when it can be told (the path argument of an
    ``openat``, the descriptor of a ``read``); ``since_s`` how long the very same call (same
    thread, same arguments) has been seen; ``meaning`` the wait in words (``opening a FIFO
    that no process writes``); ``tid`` the thread when it is not the main thread (a
    loader's worker; py-spy's ``os_thread_id``), ``thread`` its OS name (Python before 3.14
    leaves it the program's name); ``disk_wait`` that thread is in uninterruptible disk wait.
    """

    syscall: str
    wchan: str | None
    path: str | None
    since_s: float
    meaning: str
    thread: str = ""
    disk_wait: bool = False
    tid: int | None = None
    since_known: bool = True  # False: already so at the first look (``since_s`` a lower bound)

    def describe(self) -> str:
        """``blocked in openat(/m/model.safetensors): opening a FIFO that no process writes
        (wait_for_partner), for 50s``; ``thread TID (NAME) `` in front for a thread not the
        main one."""
        where = f" ({self.wchan})" if self.wchan else ""
        who = f"thread {self.tid} ({self.thread}) " if self.tid is not None else ""
        held = held_for(self.since_s, self.since_known, ",")
        if self.syscall == "?":
            return f"{who}waiting: {self.meaning}{where}{held}"
        call = f"{self.syscall}({self.path})" if self.path else self.syscall
        return f"{who}blocked in {call}: {self.meaning}{where}{held}"


@dataclass(frozen=True)
class ProcessEvidence:
    """One process of the tree at one sample.

    ``cpu_per_s`` is CPU seconds per second (1.0 = one core busy); ``read_per_s`` and
    ``write_per_s`` count every read/write call (``rchar``/``wchar``), ``disk_read_per_s``
    only what came from storage (``read_bytes``); None on the first sample or when
    ``/proc/PID/io`` is not ours to read. ``quiet_s`` is how long the process has used no
    CPU to speak of and moved no bytes, ``state_s`` how long it has been in ``state`` (both
    as far as the sampler has seen). ``files_visible`` is False when its descriptors are
    hidden from us (another user's process).
    """

    pid: int
    ppid: int
    depth: int
    role: Role
    comm: str
    state: State
    age_s: float
    cpu_s: float
    cpu_per_s: float | None
    read_per_s: float | None
    write_per_s: float | None
    disk_read_per_s: float | None
    major_faults_per_s: float | None
    quiet_s: float
    state_s: float
    rss_bytes: int
    threads: int
    files: tuple[FileEvidence, ...] = ()
    files_visible: bool = True
    blocked: BlockedCall | None = None
    gpu_bytes: int | None = None
    state_known: bool = True  # False: ``state`` was already held at the sampler's first look
    quiet_known: bool = True  # False: already quiet when its rates were first known

    @property
    def label(self) -> str:
        """``TP3``, ``launcher``, ``detokenizer``, ``ptxas``…"""
        return self.role.label

    @property
    def is_rank(self) -> bool:
        """A scheduler process (one rank of the model)."""
        return self.role.kind is Kind.SCHEDULER

    def describe(self) -> str:
        """One line: ``TP0 (PID 123) sleeping, 0.00 CPU/s, read 0 B/s; blocked in …``."""
        parts = [f"{self.label} (PID {self.pid}) {self.state.value}"]
        if self.state is not State.SLEEPING and self.state is not State.RUNNING:
            parts[0] += held_for(self.state_s, self.state_known)
        if self.cpu_per_s is not None:
            parts.append(f"{self.cpu_per_s:.2f} CPU/s")
        if self.read_per_s is not None:
            parts.append(f"read {byte_rate(self.read_per_s)}")
        if self.disk_read_per_s:
            parts.append(f"disk {byte_rate(self.disk_read_per_s)}")
        if self.quiet_s >= 1 and (self.quiet_known or self.quiet_s >= AT_LEAST_SHOWN_S):
            parts.append(f"quiet {'' if self.quiet_known else 'at least '}"
                         f"{duration(self.quiet_s)}")
        if self.gpu_bytes is not None:
            parts.append(f"GPU {byte_size(self.gpu_bytes)}")
        line = ", ".join(parts)
        details = [f.describe() for f in self.files]
        if self.blocked is not None:
            details.append(self.blocked.describe())
        return line + ("; " + "; ".join(details) if details else "")


@dataclass(frozen=True)
class TreeEvidence:
    """The whole server tree at one sample (``at``: the sampler's clock)."""

    at: float
    root_pid: int
    alive: bool
    interval_s: float | None
    processes: tuple[ProcessEvidence, ...] = ()
    peers: PeerEvidence | None = None
    gpu_available: bool = False
    gpu_reason: str = ""
    problems: tuple[str, ...] = ()

    @property
    def ranks(self) -> tuple[ProcessEvidence, ...]:
        """The scheduler processes, by rank."""
        return tuple(p for p in self.processes if p.is_rank)

    @property
    def compilers(self) -> tuple[ProcessEvidence, ...]:
        """Compiler children (nvcc, cicc, ptxas, g++, ninja…) alive now."""
        return tuple(p for p in self.processes if p.role.kind is Kind.COMPILER)

    def by_pid(self, pid: int) -> ProcessEvidence | None:
        """The process with ``pid``, if it is in the tree."""
        return next((p for p in self.processes if p.pid == pid), None)

    def in_state(self, *states: State) -> tuple[ProcessEvidence, ...]:
        """Processes in any of ``states`` (``State.STOPPED``, ``State.DISK_WAIT``…)."""
        return tuple(p for p in self.processes if p.state in states)

    def describe(self) -> list[str]:
        """Lines a person reads: one per process, then the peers and the GPU note."""
        if not self.alive:
            return [f"PID {self.root_pid}: not running"]
        lines = [p.describe() for p in self.processes]
        if self.peers is not None:
            lines.append(self.peers.describe())
        if not self.gpu_available and self.gpu_reason:
            lines.append(f"GPU: {self.gpu_reason}")
        lines.extend(f"problem: {p}" for p in self.problems)
        return [clean(line) for line in lines]  # titles, paths, a peer's address: others'


def byte_rate(per_s: float) -> str:
    """``0 B/s``, ``12.5 MB/s``."""
    return byte_size(per_s) + "/s"


def byte_size(count: float | None) -> str:
    """``512 B``, ``4.0 KB``, ``1.2 GB`` (powers of 1000, as disks are sold and rates read)."""
    if count is None:
        return "?"
    value = float(count)
    unit = "B"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            break
        value /= 1000
    return f"{value:.0f} B" if unit == "B" else f"{value:.1f} {unit}"

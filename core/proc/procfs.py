"""Small, cheap readers of Linux ``/proc``: one file per call, no psutil, never raise.

The evidence sampler reads a whole server tree every second, so each look is a single
``open``/``read`` of a short procfs file: psutil's ``Process`` objects parse more than they
are asked for (``open_files()`` reads every descriptor's fdinfo). Every reader returns None
when the file is gone (the process exited) or hidden (another user's process, or no ptrace
permission for ``syscall``/``mem``).
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PROC = "/proc"


@dataclass(frozen=True)
class Stat:
    """The fields of ``/proc/PID/stat`` the sampler uses."""

    pid: int
    comm: str
    state: str
    """One letter: R running, S sleeping, D disk wait, T stopped, t tracing stop, Z zombie…"""
    ppid: int
    major_faults: int
    cpu_ticks: int
    """utime + stime, in clock ticks (``CLOCK_TICKS`` a second)."""
    threads: int
    start_ticks: int
    """Start time after boot in clock ticks: with the PID, it names one process for good."""
    rss_pages: int


@dataclass(frozen=True)
class IoCounters:
    """``/proc/PID/io``: ``rchar``/``wchar`` count every read and write call (files, pipes,
    sockets read with ``read``); ``read_bytes`` is what had to come from the storage layer."""

    rchar: int
    wchar: int
    read_bytes: int
    write_bytes: int


@dataclass(frozen=True)
class FdInfo:
    """``/proc/PID/fdinfo/N``: the read/write offset, open flags and the file's inode."""

    pos: int
    flags: int
    ino: int | None

    @property
    def writable(self) -> bool:
        """Opened for writing (``O_WRONLY`` or ``O_RDWR``)."""
        return self.flags & 0o3 != 0


@dataclass(frozen=True)
class Syscall:
    """``/proc/PID/syscall``: the call a sleeping thread is blocked in, with its arguments."""

    number: int
    args: tuple[int, ...]

    @property
    def name(self) -> str:
        """``openat``, ``read``, ``futex``…; ``syscall N`` when not in our table."""
        return SYSCALL_NAMES.get(self.number, f"syscall {self.number}")


def read_text(path: str, limit: int = 65536) -> str | None:
    """The file's text (at most ``limit`` bytes), or None when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, limit).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def list_pids() -> list[int]:
    """Every PID in ``/proc`` (empty when /proc cannot be listed)."""
    try:
        return [int(name) for name in os.listdir(PROC) if name.isdigit()]
    except OSError:
        return []


def read_stat(pid: int, path: str | None = None) -> Stat | None:
    """``/proc/PID/stat`` (or a thread's ``task/TID/stat`` at ``path``); None when gone."""
    text = read_text(path or f"{PROC}/{pid}/stat", 4096)
    if not text:
        return None
    head, sep, tail = text.rpartition(")")
    fields = tail.split()
    if not sep or len(fields) < 22:
        return None
    try:
        return Stat(
            pid=pid,
            comm=head.partition("(")[2],
            state=fields[0],
            ppid=int(fields[1]),
            major_faults=int(fields[9]),
            cpu_ticks=int(fields[11]) + int(fields[12]),
            threads=int(fields[17]),
            start_ticks=int(fields[19]),
            rss_pages=int(fields[21]),
        )
    except ValueError:
        return None


def read_io(pid: int) -> IoCounters | None:
    """``/proc/PID/io``; None when gone or not ours to read."""
    text = read_text(f"{PROC}/{pid}/io", 1024)
    if not text:
        return None
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if value.strip().isdigit():
            values[key] = int(value)
    try:
        return IoCounters(
            values["rchar"], values["wchar"], values["read_bytes"], values["write_bytes"]
        )
    except KeyError:
        return None


def read_argv(pid: int) -> list[str] | None:
    """The command line, as the process now shows it.

    After ``setproctitle`` the title replaces argv (one string, padded with spaces), so
    ``sglang::scheduler_TP0`` reads here in full where ``comm`` keeps only 15 characters.
    """
    text = read_text(f"{PROC}/{pid}/cmdline")
    if text is None:
        return None
    parts = text.split("\0")
    while parts and not parts[-1].strip():
        parts.pop()
    if len(parts) == 1:
        return [parts[0].rstrip()]
    return parts


def list_fds(pid: int) -> list[int] | None:
    """The process's open descriptor numbers; None when gone or not ours to list."""
    try:
        return [int(name) for name in os.listdir(f"{PROC}/{pid}/fd")]
    except (OSError, ValueError):
        return None


def fd_target(pid: int, fd: int) -> str | None:
    """What descriptor ``fd`` points at: a path, ``socket:[INODE]``, ``pipe:[INODE]``…"""
    try:
        return os.readlink(f"{PROC}/{pid}/fd/{fd}")
    except OSError:
        return None


def read_fdinfo(pid: int, fd: int) -> FdInfo | None:
    """``/proc/PID/fdinfo/FD``: position, flags, inode (kernels before 5.14: no inode)."""
    text = read_text(f"{PROC}/{pid}/fdinfo/{fd}", 4096)
    if not text:
        return None
    values: dict[str, str] = {}
    for line in text.splitlines()[:4]:
        key, _, value = line.partition(":")
        values[key] = value.strip()
    try:
        ino = values.get("ino")
        return FdInfo(int(values["pos"]), int(values["flags"], 8), int(ino) if ino else None)
    except (KeyError, ValueError):
        return None


def read_wchan(pid: int, task: str | None = None) -> str | None:
    """The kernel function a sleeping process (or its thread's ``task`` directory) waits in
    (``wait_for_partner``, ``do_epoll_wait``…); None when running, hidden or gone."""
    text = read_text(f"{task or f'{PROC}/{pid}'}/wchan", 256)
    return text.strip() if text and text.strip() not in ("0", "") else None


def read_syscall(pid: int, task: str | None = None) -> Syscall | None:
    """The system call the process's main thread (or the thread whose ``task`` directory is
    given) is blocked in; None when it is running, not in a call, or the file needs ptrace
    permission we lack."""
    text = read_text(f"{task or f'{PROC}/{pid}'}/syscall", 512)
    if not text:
        return None
    fields = text.split()
    if not fields or fields[0] in ("running", "-1") or not fields[0].isdigit():
        return None
    try:
        return Syscall(int(fields[0]), tuple(int(f, 16) for f in fields[1:7]))
    except ValueError:
        return None


def read_string(pid: int, address: int, limit: int = 4096) -> str | None:
    """A NUL-terminated string from the process's memory (a path argument of a blocked
    ``openat``); None without ptrace permission. Reads up to the page end first so an
    address near an unmapped page still works."""
    if address <= 0:
        return None
    try:
        fd = os.open(f"{PROC}/{pid}/mem", os.O_RDONLY)
    except OSError:
        return None
    try:
        page_left = 4096 - address % 4096
        data = os.pread(fd, page_left, address)
        if b"\0" not in data and page_left < limit:
            data += os.pread(fd, limit - page_left, address + page_left)
    except (OSError, OverflowError):
        return None
    finally:
        os.close(fd)
    text, nul, _ = data.partition(b"\0")
    return text.decode("utf-8", "replace") if nul or text else None


def mapped_files(pid: int, suffixes: tuple[str, ...]) -> list[tuple[str, int]] | None:
    """Files ending in ``suffixes`` that the process has mapped, with the mapped length.

    safetensors maps a shard and closes its descriptor, so a rank reading weights that way
    shows the shard here, not among its descriptors. ``/proc/PID/maps`` of a torch process
    is hundreds of lines and costs milliseconds to produce: callers read it sparingly.
    """
    text = read_text(f"{PROC}/{pid}/maps", 16 * 1024 * 1024)
    if text is None:
        return None
    found: dict[str, int] = {}
    for line in text.splitlines():
        if not line.endswith(suffixes):
            continue
        fields = line.split(None, 5)
        if len(fields) < 6:
            continue
        start, _, end = fields[0].partition("-")
        try:
            found[fields[5]] = found.get(fields[5], 0) + int(end, 16) - int(start, 16)
        except ValueError:
            continue
    return sorted(found.items())


_X86_64 = {
    0: "read", 1: "write", 2: "open", 7: "poll", 17: "pread64", 19: "readv", 23: "select",
    35: "nanosleep", 42: "connect", 43: "accept", 45: "recvfrom", 47: "recvmsg", 61: "wait4",
    62: "kill", 72: "fcntl", 73: "flock", 200: "tkill", 202: "futex", 219: "restart_syscall",
    230: "clock_nanosleep", 232: "epoll_wait", 234: "tgkill",
    247: "waitid", 257: "openat", 270: "pselect6", 271: "ppoll", 281: "epoll_pwait",
    288: "accept4", 295: "preadv", 437: "openat2", 441: "epoll_pwait2",
}  # fmt: skip
_AARCH64 = {
    22: "epoll_pwait", 25: "fcntl", 32: "flock", 56: "openat", 63: "read", 64: "write",
    65: "readv", 67: "pread64", 69: "preadv", 72: "pselect6", 73: "ppoll", 95: "waitid",
    98: "futex", 101: "nanosleep", 115: "clock_nanosleep", 128: "restart_syscall",
    129: "kill", 130: "tkill", 131: "tgkill",
    202: "accept", 203: "connect", 207: "recvfrom", 212: "recvmsg", 242: "accept4",
    260: "wait4", 437: "openat2", 441: "epoll_pwait2",
}  # fmt: skip
SYSCALL_NAMES: dict[int, str] = _AARCH64 if platform.machine() == "aarch64" else _X86_64

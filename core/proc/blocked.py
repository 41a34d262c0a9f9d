"""Where a sleeping process waits, in words: its system call, the kernel function it is
parked in, and the file the call concerns.

``/proc/PID/syscall`` gives the call and its arguments, ``/proc/PID/wchan`` the kernel wait
function; an ``openat`` path is read from the process's memory, a ``read`` descriptor is
looked up in ``/proc/PID/fd``. So a rank stuck opening a named pipe nobody writes reads as
``blocked in openat(/m/model.safetensors): opening a FIFO that no process writes``, with no
Python stack needed. Both files need the same permission as ptrace (our own processes, or
root); without it only the wait function (or nothing) is known.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from eagle_tui.core.proc import procfs

_PATH_ARG = {"open": 0, "openat": 1, "openat2": 1}
_FD_ARG = {
    "read": 0,
    "pread64": 0,
    "readv": 0,
    "preadv": 0,
    "write": 0,
    "flock": 0,
    "fcntl": 0,
    "recvfrom": 0,
    "recvmsg": 0,
    "accept": 0,
    "accept4": 0,
    "connect": 0,
}

_WCHAN_MEANING = (
    ("wait_for_partner", "opening a FIFO that no process writes"),
    ("fifo_open", "opening a FIFO"),
    ("pipe_read", "reading a pipe"),
    ("pipe_wait", "waiting on a pipe"),
    ("pipe_write", "writing a full pipe"),
    ("do_signal_stop", "stopped by a signal"),
    ("ptrace_stop", "stopped by a tracer"),
    ("locks_lock_inode_wait", "waiting for a file lock"),
    ("flock", "waiting for a file lock"),
    ("posix_lock", "waiting for a file lock"),
    ("futex", "waiting on a lock or condition"),
    ("epoll", "waiting for events"),
    ("do_sys_poll", "waiting for events"),
    ("poll_schedule_timeout", "waiting for events"),
    ("do_select", "waiting for events"),
    ("inet_csk_accept", "waiting for a connection"),
    ("inet_wait_for_connect", "connecting"),
    ("sk_wait_data", "waiting for network data"),
    ("tcp_recvmsg", "waiting for network data"),
    ("unix_stream", "reading a local socket"),
    ("nanosleep", "sleeping"),
    ("do_wait", "waiting for a child process"),
    ("folio_wait", "waiting for the disk"),
    ("wait_on_page", "waiting for the disk"),
    ("io_schedule", "waiting for the disk"),
    ("blk_", "waiting for the disk"),
    ("nfs", "waiting for NFS"),
    ("rpc_wait", "waiting for NFS"),
    ("fuse", "waiting for a FUSE file system"),
    ("request_wait_answer", "waiting for a FUSE file system"),
)
_SYSCALL_MEANING = {
    "futex": "waiting on a lock or condition",
    "epoll_wait": "waiting for events",
    "epoll_pwait": "waiting for events",
    "epoll_pwait2": "waiting for events",
    "poll": "waiting for events",
    "ppoll": "waiting for events",
    "select": "waiting for events",
    "pselect6": "waiting for events",
    "nanosleep": "sleeping",
    "clock_nanosleep": "sleeping",
    "read": "reading",
    "pread64": "reading",
    "readv": "reading",
    "preadv": "reading",
    "open": "opening a file",
    "openat": "opening a file",
    "openat2": "opening a file",
    "flock": "waiting for a file lock",
    "fcntl": "waiting for a file lock",
    "wait4": "waiting for a child process",
    "waitid": "waiting for a child process",
    "accept": "waiting for a connection",
    "accept4": "waiting for a connection",
    "connect": "connecting",
    "recvfrom": "waiting for network data",
    "recvmsg": "waiting for network data",
}


@dataclass(frozen=True)
class Blocked:
    """One look at a thread's wait. ``key`` stays equal while the very same call goes on
    (thread, call number and arguments, or the kernel function when there is no call);
    ``thread`` is the thread's name when it is not the main thread."""

    syscall: str
    wchan: str | None
    path: str | None
    meaning: str
    key: tuple[int | str, ...]
    tid: int
    thread: str = ""
    disk_wait: bool = False


def meaning_of(syscall: str, wchan: str | None) -> str:
    """The wait in words: the kernel function when it is known, else the system call."""
    if wchan:
        for fragment, words in _WCHAN_MEANING:
            if fragment in wchan:
                return words
    return _SYSCALL_MEANING.get(syscall, "in the kernel")


def look(pid: int, tid: int | None = None) -> Blocked | None:
    """The wait of one thread (the main thread by default); None when it is running or
    nothing can be read."""
    tid = pid if tid is None else tid
    task = f"{procfs.PROC}/{pid}/task/{tid}"
    wchan = procfs.read_wchan(pid, task)
    call = procfs.read_syscall(pid, task)
    stat = procfs.read_stat(tid, f"{task}/stat")
    disk = stat is not None and stat.state == "D"
    thread = "" if tid == pid or stat is None else stat.comm
    if call is None:
        if wchan is None:
            return None
        return Blocked("?", wchan, None, meaning_of("", wchan), (tid, wchan), tid, thread, disk)
    return Blocked(
        call.name, wchan, _path(pid, call), meaning_of(call.name, wchan),
        (tid, call.number, *call.args), tid, thread, disk,
    )  # fmt: skip


def again(pid: int, previous: Blocked) -> Blocked | None:
    """``previous`` if its thread is still in the very same call (one read), else a fresh
    look at that thread."""
    call = procfs.read_syscall(pid, f"{procfs.PROC}/{pid}/task/{previous.tid}")
    if call is not None and (previous.tid, call.number, *call.args) == previous.key:
        return previous
    return look(pid, previous.tid)


def look_threads(pid: int) -> Blocked | None:
    """The most telling wait among all the process's threads: one in disk wait, then one
    blocked on a file (a loader thread opening a shard while the main thread waits for it),
    else the main thread's."""
    try:
        tids = sorted(int(t) for t in os.listdir(f"{procfs.PROC}/{pid}/task"))
    except (OSError, ValueError):
        return look(pid)
    best: Blocked | None = None
    best_score = -1
    for tid in [pid, *(t for t in tids if t != pid)]:
        seen = look(pid, tid)
        if seen is None:
            continue
        score = 3 if seen.disk_wait else 2 if seen.path else 1 if tid == pid else 0
        if score > best_score:
            best, best_score = seen, score
    return best


def _path(pid: int, call: procfs.Syscall) -> str | None:
    if call.name in _PATH_ARG:
        return procfs.read_string(pid, call.args[_PATH_ARG[call.name]])
    if call.name in _FD_ARG:
        fd = call.args[_FD_ARG[call.name]]
        target = procfs.fd_target(pid, fd) if 0 <= fd < 1 << 20 else None
        return target if target is not None and target.startswith("/") else None
    return None

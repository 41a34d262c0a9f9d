"""One controller per batch directory: an exclusive ``flock`` on its lock file
(``BatchDir.lock``, ``.eagle-tui.lock``).

The lock is held for the whole life of a worker (or a foreground capture) and released by
the kernel when the process dies, however it dies, so a SIGKILLed worker never leaves a
stale lock behind. The file itself stays (deleting a lock file races with the next taker);
while held, it names its holder so a refusal can say who.

``flock`` locks belong to an open file, not to a process: a second ``OutputLock`` on the
same directory conflicts even inside the same process. Probing whether a directory is held
(``is_held``) takes the lock for an instant, so ``acquire`` retries briefly before it
concludes that someone else really holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import stat
import time
from pathlib import Path
from types import TracebackType
from typing import Self

import msgspec

from eagle_tui.core.errors import BatchLocked, UntrustedOutput
from eagle_tui.core.fsio import UnsafeFile, open_exclusive_rw
from eagle_tui.core.shards.batchdir.layout import BatchDir
from eagle_tui.core.shards.batchdir.owned import claim_batch_dir

PROBE_RETRY_S = 1.0  # a probe holds the lock for microseconds; a real holder for hours


class LockHolder(msgspec.Struct, frozen=True, kw_only=True):
    """What the holder writes into the lock file (fields may be missing).

    Read leniently on purpose: the holder rewrites the file in place, so a reader can meet
    a torn or empty document, and it only ever serves an error message; anything that does
    not decode reads as "another process".
    """

    pid: int | None = None
    batch_id: str | None = None
    host: str | None = None
    since: float | None = None

    def describe(self) -> str:
        """``pid 123 (batch X) since 12:00:00`` with whatever is known."""
        parts = [f"pid {self.pid}" if self.pid else "another process"]
        if self.batch_id:
            parts.append(f"(batch {self.batch_id})")
        if self.host and self.host != socket.gethostname():
            parts.append(f"on host {self.host}")
        if self.since:
            parts.append("since " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since)))
        return " ".join(parts)


class OutputLock:
    """The exclusive lock on one batch directory; use ``with OutputLock(d).acquire(): ...``."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.path = BatchDir(out_dir).lock
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._fd is not None

    def acquire(self, *, batch_id: str | None = None, retry_s: float = PROBE_RETRY_S) -> Self:
        """Take the lock (creating the directory); BatchLocked when someone else holds it,
        UntrustedOutput when the directory or the lock file is not safely ours (another
        user's, writable by others, a link: ``owned``)."""
        claim_batch_dir(self.out_dir)
        try:
            fd = open_exclusive_rw(self.path, "lock file", 0o600)
        except UnsafeFile as e:
            raise UntrustedOutput(str(e)) from None
        deadline = time.monotonic() + retry_s
        while not _try_flock(fd):
            if time.monotonic() >= deadline:
                holder = _read_holder(fd)
                os.close(fd)
                raise BatchLocked(
                    f"{self.out_dir} is already being captured by {holder.describe()}; only "
                    "one worker may write a batch directory. Stop that batch (eagle-tui stop "
                    "BATCH), wait for it to finish, or choose another --out",
                    holder_pid=holder.pid)
            time.sleep(0.02)  # only ever reached while a probe or a real holder has it
        self._fd = fd
        _write_holder(fd, batch_id)
        return self

    def release(self) -> None:
        """Give the lock up (closing the file releases the flock)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Self:
        if not self.held:
            self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.release()


def is_held(out_dir: Path) -> bool:
    """True when some process holds ``out_dir``'s lock right now (a worker is alive).
    A lock file that is a link, a FIFO or a device is no worker's lock: False."""
    fd = _open_to_probe(BatchDir(out_dir).lock)
    if fd is None:
        return False
    try:
        if _try_flock(fd, fcntl.LOCK_SH):
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        return True
    finally:
        os.close(fd)


def holder_of(out_dir: Path) -> LockHolder | None:
    """Who holds ``out_dir``'s lock, or None when it is free."""
    if not is_held(out_dir):
        return None
    fd = _open_to_probe(BatchDir(out_dir).lock)
    if fd is None:
        return None
    try:
        return _read_holder(fd)
    finally:
        os.close(fd)


def _open_to_probe(path: Path) -> int | None:
    """A read-only descriptor of the lock file, never through a link and never blocking
    on a FIFO; None when there is no such regular file."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
    try:
        fd = os.open(path, flags)
    except OSError:  # missing, a link (ELOOP), unreadable: no lock of a worker we could ask
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def _try_flock(fd: int, mode: int = fcntl.LOCK_EX) -> bool:
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


_HOLDER = msgspec.json.Decoder(LockHolder)
_ENCODER = msgspec.json.Encoder()


def _write_holder(fd: int, batch_id: str | None) -> None:
    info = LockHolder(pid=os.getpid(), batch_id=batch_id, host=socket.gethostname(),
                      since=time.time())
    # Only a description for `batches` and error messages: the flock is the lock, so a
    # full disk that refuses these bytes changes nothing.
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, _ENCODER.encode(info), 0)


def _read_holder(fd: int) -> LockHolder:
    try:
        return _HOLDER.decode(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, msgspec.DecodeError):
        return LockHolder()

"""Durable file writes (atomic replace, directory fsync, a hashing write sink) and bounded
reads of the small files we are handed.

A rename is only durable once the directory holding it is fsynced, and a file's bytes only
once the file is; both are done here so callers cannot forget one.

Files we write in a directory of ours (a batch's files, temp files) are never written through
a link planted at their name: temp files are created new (:func:`create_new`, ``O_EXCL`` and
``O_NOFOLLOW``), logs appended to with :func:`open_append` (``O_NOFOLLOW``, a regular file of
ours, never blocking on a FIFO); anything else there is :class:`UnsafeFile` (an OSError).

Every file we expect to be small (a manifest, an API key file, a stored config or result, a
model's ``config.json``, the head of a prompt file) is read with :func:`read_small`: at
most ``limit`` bytes, and only from a regular file. A FIFO, a device (``/dev/zero``), a
socket or a directory is refused with :class:`UnfitFile` before a byte is read, and opening
never blocks (a FIFO with no writer would otherwise hang ``open`` forever). A base module:
callers turn :class:`UnfitFile` (a ``ValueError`` whose text is the whole one-line message)
into the error that fits them.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path
from typing import IO

from eagle_tui.core.errors import UnfitFile

TMP_SUFFIX = ".tmp"
DROP_BEHIND_BYTES = 64 << 20
"""What a large file written once passes as :class:`HashingFile`'s ``drop_behind``."""
_CAN_DROP = hasattr(os, "posix_fadvise")  # Linux and most Unix; not macOS


def fsync_dir(directory: Path) -> None:
    """fsync a directory so renames inside it survive a power loss."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically; on failure the old file stays and no
    temp file is left behind. The caller fsyncs the directory (see :func:`fsync_dir`).

    The temp file is created new (:func:`create_new`: never through a link planted at its
    name); the rename replaces whatever ``path`` is (a link there is replaced, not followed).
    """
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = create_new(tmp, "temporary file")
    try:
        with open(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        _unlink_own(tmp)
        raise


# -- files we write: never through a link, never a FIFO or device -----------------------------

_WRITE_FLAGS = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
FILE_MODE = 0o644


def create_new(path: Path, what: str, mode: int = FILE_MODE) -> int:
    """A write-only descriptor of a file created now at ``path`` (``O_EXCL``, ``O_NOFOLLOW``).

    A temp file left there by a crash (a regular file of ours) is removed first; anything
    else at that name (a symlink, a FIFO, another user's file) is refused with
    :class:`UnsafeFile`, so a link planted at a temp name is never written through."""
    flags = _WRITE_FLAGS | os.O_CREAT | os.O_EXCL
    try:
        return os.open(path, flags, mode)
    except FileExistsError:
        _remove_leftover(path, what)
    return os.open(path, flags, mode)


def open_append(path: Path, what: str, mode: int = FILE_MODE) -> int:
    """A descriptor appending to ``path`` (created when missing), never through a symlink.

    The file must be a regular file of ours: a link (``O_NOFOLLOW``), a FIFO or device
    (opened without blocking, checked on the descriptor) or another user's file is refused
    with :class:`UnsafeFile` (an OSError, so writers report it as any failed write)."""
    flags = _WRITE_FLAGS | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK
    fd = _open_no_link(path, flags, mode, what)
    return _own_regular(fd, path, what)


def open_exclusive_rw(path: Path, what: str, mode: int = FILE_MODE) -> int:
    """A read-write descriptor of ``path`` (created when missing) under the same rules as
    :func:`open_append`: a lock file, rewritten in place."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK
    fd = _open_no_link(path, flags, mode, what)
    return _own_regular(fd, path, what)


def _open_no_link(path: Path, flags: int, mode: int, what: str) -> int:
    try:
        return os.open(path, flags, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:  # O_NOFOLLOW met a symlink
            raise UnsafeFile(_link_refusal(path, what)) from None
        if e.errno == errno.ENXIO:  # a FIFO with no reader, opened without blocking
            raise UnsafeFile(f"{what} {path} is a FIFO (named pipe), not a regular file; "
                            f"remove it: rm {path}") from None
        raise


def _own_regular(fd: int, path: Path, what: str) -> int:
    try:
        info = os.fstat(fd)
        problem = unsafe_to_write(info, path, what)
        if problem is not None:
            raise UnsafeFile(problem)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _remove_leftover(path: Path, what: str) -> None:
    """Remove a crash's leftover at ``path`` (a regular file of ours); UnsafeFile otherwise."""
    info = os.lstat(path)
    problem = unsafe_to_write(info, path, what)
    if problem is not None:
        raise UnsafeFile(problem)
    os.unlink(path)


def unsafe_to_write(info: os.stat_result, path: Path, what: str) -> str | None:
    """Why the file ``info`` (from ``lstat``/``fstat``) describes is not one eagle-tui may
    write, or None: a symlink, not a regular file, or another user's."""
    if stat.S_ISLNK(info.st_mode):
        return _link_refusal(path, what)
    if not stat.S_ISREG(info.st_mode):
        return f"{what} {path} is {kind_of(info.st_mode)}, not a regular file; remove it: rm {path}"
    if info.st_uid != os.geteuid():
        return (f"{what} {path} belongs to uid {info.st_uid}, not to you: eagle-tui writes "
                f"only its own files. Remove it: rm {path}")
    return None


def open_read_own(path: Path, what: str) -> int | None:
    """A read-only descriptor of ``path``, a file eagle-tui wrote in a directory of its own
    (a batch's ``failures.jsonl``, ``rejects.jsonl``): None when there is none, UnsafeFile
    when it is a link, a FIFO or device, or another user's (never read through)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK
    try:
        fd = _open_no_link(path, flags, 0, what)
    except FileNotFoundError:
        return None
    return _own_regular(fd, path, what)


def _unlink_own(path: Path) -> None:
    """Remove our temp file after a failure (never a link or file someone put there)."""
    try:
        info = os.lstat(path)
    except OSError:
        return
    if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid():
        path.unlink(missing_ok=True)


def _link_refusal(path: Path, what: str) -> str:
    return (f"{what} {path} is a symbolic link; eagle-tui writes only the file itself, "
            f"never through a link. If you did not make it: rm {path}")


class HashingFile:
    """A binary write-only file that keeps a sha256 and a byte count of what it wrote.

    Parquet writes sequentially, so hashing on the way out gives the file's checksum without
    reading it back.
    """

    def __init__(self, path: Path, *, drop_behind: int = 0) -> None:
        """Create ``path`` for writing (:func:`create_new`: a leftover of ours is replaced,
        a link is refused). ``drop_behind``: every this many bytes, keep the page cache
        small for a large file written once (:meth:`_drop_behind`); 0 never does."""
        self.path = path
        # created new: never through a link planted at the (temporary) name
        self._handle: IO[bytes] = open(  # noqa: SIM115 (held open)
            create_new(path, "temporary file"), "wb")
        self._sha = hashlib.sha256()
        self.size = 0
        self._drop_every = drop_behind if _CAN_DROP else 0
        self._next_drop = self._drop_every or -1

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._handle.closed

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Write all of ``data``; returns its length."""
        view = memoryview(data)
        self._handle.write(view)
        self._sha.update(view)
        self.size += view.nbytes
        if 0 <= self._next_drop <= self.size:
            self._drop_behind()
        return view.nbytes

    def _drop_behind(self) -> None:
        """Start writing back what was written and drop from the page cache what is already
        on disk (the pages still being written stay until the next call).

        Why: a multi-GiB export otherwise fills the page cache, and on the VMs measured
        growing it cost more kernel time than encoding the file (issue 23: 4.4 GiB written
        in 8.8-22.7 s, 7.8-18.3 s of it system time, against 2.3-3.0 s with this). It also leaves
        the host's cache to the files that are read again. Advice only: an error is ignored.
        """
        self._next_drop = self.size + self._drop_every
        self._handle.flush()  # a full disk is raised as ever
        self._advise_drop()

    def _advise_drop(self) -> None:
        try:
            os.posix_fadvise(self._handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            self._next_drop = -1  # a file system that refuses advice: write as before

    def tell(self) -> int:
        """Bytes written so far."""
        return self.size

    def flush(self) -> None:
        """Flush Python's buffer to the OS."""
        self._handle.flush()

    def writable(self) -> bool:
        """Always True (pyarrow asks)."""
        return True

    def readable(self) -> bool:
        """Always False (pyarrow asks)."""
        return False

    def seekable(self) -> bool:
        """Always False: writes are sequential."""
        return False

    def sync(self) -> None:
        """Flush and fsync, so the bytes are on disk before a rename (with ``drop_behind``,
        the now clean pages leave the cache too)."""
        self._handle.flush()
        os.fsync(self._handle.fileno())
        if self._next_drop >= 0:
            self._advise_drop()

    def hexdigest(self) -> str:
        """sha256 of everything written."""
        return self._sha.hexdigest()

    def close(self) -> None:
        """Close the underlying file (idempotent)."""
        self._handle.close()


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    """sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


_ERRNO_TEXT = {
    errno.ENOSPC: "disk full (ENOSPC)",
    errno.EDQUOT: "disk quota exceeded (EDQUOT)",
    errno.EROFS: "read-only file system (EROFS)",
    errno.EIO: "I/O error (EIO)",
    errno.EACCES: "permission denied (EACCES)",
}


def describe_os_error(error: BaseException) -> str:
    """Short text for the cause of a failed write, naming disk-full plainly."""
    if isinstance(error, UnsafeFile):
        return error.message
    if isinstance(error, OSError) and error.errno is not None:
        return _ERRNO_TEXT.get(error.errno) or f"{error.strerror or error} (errno {error.errno})"
    return f"{type(error).__name__}: {error}"


# -- bounded reads of small files ------------------------------------------------------------

KIB, MIB = 1 << 10, 1 << 20


class UnsafeFile(OSError):
    """A file eagle-tui will not write: a symlink, a FIFO or device, another user's file.
    An OSError, so every writer reports it as a failed write; ``str()`` is the message."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EPERM, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def kind_of(mode: int) -> str:
    """What a non-regular ``st_mode`` is, in words: ``a FIFO (named pipe)``..."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def size_text(limit: int) -> str:
    """``64 KiB``, ``16 MiB``: a limit as people read it."""
    if limit % MIB == 0 and limit:
        return f"{limit // MIB} MiB"
    return f"{limit // KIB} KiB" if limit % KIB == 0 and limit else f"{limit} bytes"


def check_regular(path: Path, what: str, *, follow: bool = True) -> os.stat_result:
    """``stat`` of ``path`` (following symlinks unless ``follow`` is False); UnfitFile when
    it is not a regular file. OSError (missing, permission) passes through."""
    info = os.stat(path, follow_symlinks=follow)
    if stat.S_ISLNK(info.st_mode):
        raise UnfitFile(f"{what} {path} is a symbolic link; eagle-tui reads only the file "
                        f"itself here, never through a link. If you did not make it: rm {path}")
    if not stat.S_ISREG(info.st_mode):
        raise UnfitFile(f"{what} {path} is {kind_of(info.st_mode)}, not a regular file; "
                        f"pass the {what} itself (a regular file)")
    return info


def open_regular(path: Path, what: str, *, follow: bool = True) -> int:
    """A blocking read-only descriptor of the regular file ``path``; UnfitFile for anything
    else. Opened with O_NONBLOCK so a FIFO with no writer cannot hang the open; the file
    type is checked on the descriptor, so a swap after a ``stat`` cannot get past it.
    ``follow=False`` (the files of a batch directory) refuses a symlink, also one swapped
    in after the check (``O_NOFOLLOW``)."""
    check_regular(path, what, follow=follow)  # a socket cannot be opened: say so in words
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(path, flags if follow else flags | os.O_NOFOLLOW)
    except OSError as e:
        if e.errno == errno.ELOOP and not follow:
            check_regular(path, what, follow=False)  # says "a symbolic link"
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnfitFile(f"{what} {path} is {kind_of(mode)}, not a regular file; "
                            f"pass the {what} itself (a regular file)")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_small(path: Path, limit: int, what: str, *, follow: bool = True) -> bytes:
    """All bytes of the regular file ``path`` when there are at most ``limit`` of them;
    UnfitFile when it is not a regular file or is larger. OSError passes through.
    ``follow=False``: a symlink is refused (:func:`open_regular`)."""
    fd = open_regular(path, what, follow=follow)
    try:
        data = _read_up_to(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UnfitFile(f"{what} {path} is larger than {size_text(limit)}, more than a {what} "
                        "ever holds; check that it is the right file")
    return data


def read_head(path: Path, count: int, what: str) -> bytes:
    """The first ``count`` bytes (or fewer) of the regular file ``path``."""
    fd = open_regular(path, what)
    try:
        return _read_up_to(fd, count)
    finally:
        os.close(fd)


def read_tail(path: Path, count: int, what: str, *, follow: bool = True) -> bytes:
    """The last ``count`` bytes (or fewer) of the regular file ``path``: a log's end
    without reading the whole log (a FIFO or device is refused, never read)."""
    fd = open_regular(path, what, follow=follow)
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - count), os.SEEK_SET)
        return _read_up_to(fd, count)
    finally:
        os.close(fd)


def _read_up_to(fd: int, count: int) -> bytes:
    parts: list[bytes] = []
    left = count
    while left > 0:
        chunk = os.read(fd, min(left, MIB))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)

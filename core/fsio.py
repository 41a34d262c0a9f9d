"""Durable file writes: atomic replace, directory fsync, and a hashing write sink.

A rename is only durable once the directory holding it is fsynced, and a file's bytes only
once the file is; both are done here so callers cannot forget one.
"""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path
from typing import IO

TMP_SUFFIX = ".tmp"


def fsync_dir(directory: Path) -> None:
    """fsync a directory so renames inside it survive a power loss."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically; on failure the old file stays and no
    temp file is left behind. The caller fsyncs the directory (see :func:`fsync_dir`)."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class HashingFile:
    """A binary write-only file that keeps a sha256 and a byte count of what it wrote.

    Parquet writes sequentially, so hashing on the way out gives the file's checksum without
    reading it back.
    """

    def __init__(self, path: Path) -> None:
        """Create (truncate) ``path`` for writing."""
        self.path = path
        self._handle: IO[bytes] = open(path, "wb")  # noqa: SIM115 (held open)
        self._sha = hashlib.sha256()
        self.size = 0

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
        return view.nbytes

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
        """Flush and fsync, so the bytes are on disk before a rename."""
        self._handle.flush()
        os.fsync(self._handle.fileno())

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
    if isinstance(error, OSError) and error.errno is not None:
        return _ERRNO_TEXT.get(error.errno) or f"{error.strerror or error} (errno {error.errno})"
    return f"{type(error).__name__}: {error}"

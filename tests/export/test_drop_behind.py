"""A large file written once leaves the page cache behind it (issue 23: on the VMs measured,
growing the cache by a 4.4 GiB export cost more kernel time than encoding it), and keeps
every byte.

Residency is read with the kernel's own ``mincore`` (through ctypes, as ``vmtouch`` does), so
the test sees what the kernel did, not which calls were made.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import hashlib
import mmap
import os
from pathlib import Path

import pytest

from eagle_tui.core.fsio import HashingFile

PAGE = mmap.PAGESIZE
CHUNK = os.urandom(64 * 1024)
TOTAL = 32 << 20
CONTENT = CHUNK * (TOTAL // len(CHUNK))
EVERY = 2 << 20

pytestmark = pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise")


def resident_pages(path: Path) -> int:
    """Pages of ``path`` in the page cache now."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    size = path.stat().st_size
    vector = (ctypes.c_ubyte * ((size + PAGE - 1) // PAGE))()
    # a private mapping is writable for ctypes and touches no page until written
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), size,
                                                access=mmap.ACCESS_COPY) as mapped:
        start = ctypes.c_char.from_buffer(mapped)
        try:
            if libc.mincore(ctypes.byref(start), ctypes.c_size_t(size), vector) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
        finally:
            del start  # the mapping closes only once nothing points into it
    return sum(byte & 1 for byte in vector)


def written(path: Path, drop_behind: int) -> HashingFile:
    """:data:`TOTAL` bytes written through a :class:`HashingFile`, not yet synced."""
    file = HashingFile(path, drop_behind=drop_behind)
    for _ in range(TOTAL // len(CHUNK)):
        file.write(CHUNK)
    return file


def write(path: Path, drop_behind: int) -> str:
    """:func:`written`, fsynced and closed; its sha256."""
    file = written(path, drop_behind)
    file.sync()
    file.close()
    return file.hexdigest()


def test_a_file_written_with_drop_behind_leaves_the_cache_and_keeps_every_byte(
        tmp_path: Path) -> None:
    kept, dropped = tmp_path / "kept", tmp_path / "dropped"
    kept_digest = write(kept, drop_behind=0)
    if resident_pages(kept) < TOTAL // PAGE // 2:
        pytest.skip("this file system does not keep written pages cached (nothing to drop)")
    control = os.open(kept, os.O_RDONLY)
    try:
        os.posix_fadvise(control, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(control)
    if resident_pages(kept) > TOTAL // PAGE // 2:
        pytest.skip("this file system keeps pages the kernel is advised to drop (tmpfs)")
    file = written(dropped, drop_behind=EVERY)
    # while writing, the last windows stay (written back as the next ones were written;
    # on a loaded machine a few): far fewer than the whole file, which stays without it
    assert resident_pages(dropped) <= TOTAL // PAGE // 2
    file.sync()
    file.close()
    assert resident_pages(dropped) <= EVERY // PAGE  # the sync dropped what it made clean
    assert file.hexdigest() == kept_digest
    assert dropped.read_bytes() == CONTENT


def test_a_file_system_that_refuses_the_advice_is_written_as_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def refuse(fd: int, offset: int, length: int, advice: int) -> None:
        calls.append(advice)
        raise OSError(errno.EINVAL, "Invalid argument (injected)")

    monkeypatch.setattr(os, "posix_fadvise", refuse)
    digest = write(tmp_path / "file", drop_behind=EVERY)
    assert calls == [os.POSIX_FADV_DONTNEED]  # asked once, then never again
    assert (tmp_path / "file").read_bytes() == CONTENT
    assert digest == hashlib.sha256(CONTENT).hexdigest()

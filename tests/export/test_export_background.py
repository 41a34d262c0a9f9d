"""The export's threads: read-ahead keeps order, raises the reader's error where the item
would have been and never hangs when the consumer stops early (a write failed); the writer
thread writes in order and hands its error to the next call."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import pytest

from eagle_tui.core.export.background import BackgroundFile, prefetched
from eagle_tui.core.fsio import HashingFile


def _numbers(count: int, fail_at: int | None = None) -> Iterator[int]:
    for n in range(count):
        if n == fail_at:
            raise ValueError(f"row group {n} cannot be read")
        yield n


def test_read_ahead_keeps_order_and_every_item() -> None:
    assert list(prefetched(_numbers(50))) == list(range(50))
    assert list(prefetched(_numbers(0))) == []


def test_the_readers_error_is_raised_where_its_item_would_be() -> None:
    seen = []
    with pytest.raises(ValueError, match="row group 7"):
        for n in prefetched(_numbers(20, fail_at=7)):
            seen.append(n)
    assert seen == list(range(7))


@pytest.mark.parametrize("stop_after", [0, 1, 2, 3, 9])
def test_stopping_early_ends_the_reader(stop_after: int) -> None:
    """Any point, including with the reader's queue full and its last entry still to put
    (this hung once: the reader waited to put, the consumer waited for it to end)."""
    for _ in range(20):
        for n in prefetched(_numbers(stop_after + 2)):
            if n == stop_after:
                break


class _FullDisk(HashingFile):
    def __init__(self, path: Path, budget: int) -> None:
        super().__init__(path)
        self.budget = budget

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if len(data) > self.budget:
            raise OSError(errno.ENOSPC, "No space left on device (injected)")
        self.budget -= len(data)
        return super().write(data)


def test_the_writer_writes_in_order_and_hands_back_its_error(tmp_path: Path) -> None:
    file = HashingFile(tmp_path / "ok")
    out = BackgroundFile(file)
    for n in range(100):
        out.write(b"%d\n" % n)
    out.drain()
    file.close()
    assert (tmp_path / "ok").read_bytes() == b"".join(b"%d\n" % n for n in range(100))
    full = _FullDisk(tmp_path / "full", budget=10)
    out = BackgroundFile(full)
    with pytest.raises(OSError, match="No space left"):  # by a later write, a flush or drain
        for _ in range(100):
            out.write(b"12345")
        out.flush()
    with pytest.raises(OSError, match="No space left"):
        out.drain()
    full.close()
    assert (tmp_path / "full").read_bytes() == b"1234512345"

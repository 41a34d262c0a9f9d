"""The export's threads: read-ahead keeps order, raises the reader's error where the item
would have been and never hangs when the consumer stops early (a write failed); the writer
thread writes in order and hands its error to the next call."""

from __future__ import annotations

import errno
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest
from support.waiting import poll_until, wait_until

from eagle_tui.core.export import encode
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


def test_the_reader_is_one_item_ahead_not_two() -> None:
    """The next row group is read while this one is used, and no further (memory holds two
    row groups, not three)."""
    started: list[int] = []

    def items() -> Iterator[int]:
        for n in range(5):
            started.append(n)
            yield n

    for n in prefetched(items()):
        ahead = min(n + 2, 5)
        wait_until(lambda ahead=ahead: len(started) >= ahead, 10, f"item {n + 1} read ahead")
        # given 50 ms more, the reader still has not started a third item
        assert not poll_until(lambda ahead=ahead: len(started) > ahead, 0.05)


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


# -- a row group's ids encoded in two halves, the second by a helper thread -----------------

def _ids(rows: int) -> pa.ChunkedArray:
    lists = [[(7 * r + k) % 1200 for k in range(r % 5)] for r in range(rows)]  # empty rows too
    return pa.chunked_array([pa.array(lists, pa.list_(pa.int32()))])


@pytest.mark.parametrize("rows", [0, 1, 2, 3, 8, 101])
def test_two_halves_give_every_row_as_one_pass_does(rows: int) -> None:
    ids = _ids(rows)
    whole = encode.id_texts(ids)
    with ThreadPoolExecutor(1) as helper:
        halves = encode.id_texts_on(ids, helper)
        assert [bytes(halves.row(r)) for r in range(rows)] == \
            [bytes(whole.row(r)) for r in range(rows)]


@pytest.mark.parametrize("failing", ["first", "second"])
def test_a_half_that_fails_raises_its_own_error_and_leaves_no_work_behind(
    failing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _ids(40)
    real = encode.id_texts
    first_half_rows = 20
    error = MemoryError(f"{failing} half cannot be encoded")
    finished: list[int] = []

    def id_texts(half: pa.ChunkedArray) -> encode.IdTexts:
        in_helper = threading.current_thread() is not threading.main_thread()
        if in_helper == (failing == "second"):  # the helper encodes the second half
            raise error
        texts = real(half)
        finished.append(len(half))
        return texts

    monkeypatch.setattr(encode, "id_texts", id_texts)
    with ThreadPoolExecutor(1) as helper:
        with pytest.raises(MemoryError) as raised:
            encode.id_texts_on(ids, helper)
        assert raised.value is error
        assert finished == [first_half_rows]  # the other half ran to its end before the raise

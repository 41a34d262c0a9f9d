"""Threads that keep the export's other core busy: the next row group is read while this
one is encoded, and JSONL's data file hashed and written (parquet's is written by the caller:
its limit is pyarrow's writer there, and hashing and writing are ~4 % of its time).

sha256 and file writes release the GIL, as do Arrow's parquet reads, so on two cores the
three overlap instead of adding up. Order is kept (one thread each, FIFO queues), so the bytes
are those a single thread writes; an error in a thread is raised by the caller's next call,
as the same exception, so a full disk or an unreadable row group reads as before.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterator
from typing import TypeVar

from eagle_tui.core.fsio import HashingFile

DEPTH = 1
"""Chunks waiting in the writer's queue, or row groups read ahead, beside the one each side
holds: enough to overlap, little memory (a chunk is up to a few MiB of output)."""

Item = TypeVar("Item")


class BackgroundFile:
    """Writes to a :class:`HashingFile` from a thread, in order; ``tell`` counts what was
    handed over. Call :meth:`drain` before reading the file's size or hash."""

    def __init__(self, file: HashingFile) -> None:
        self.file = file
        self._handed = 0
        self._error: BaseException | None = None
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=DEPTH)
        self._thread = threading.Thread(target=self._run, name="export-writer", daemon=True)
        self._thread.start()

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Queue ``data`` (copied unless it is immutable bytes: a caller may reuse its buffer)."""
        self._raise_error()
        chunk = data if isinstance(data, bytes) else bytes(data)
        self._queue.put(chunk)
        self._handed += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        """Bytes handed over so far (pyarrow asks)."""
        return self._handed

    def flush(self) -> None:
        """Wait until every queued chunk is written."""
        self._queue.join()
        self._raise_error()

    def writable(self) -> bool:
        """Always True (pyarrow asks)."""
        return True

    @property
    def closed(self) -> bool:
        """True once :meth:`drain` stopped the thread (pyarrow asks)."""
        return not self._thread.is_alive()

    def drain(self) -> None:
        """Write what is queued, stop the thread, raise its error if it had one."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        self._raise_error()

    def _run(self) -> None:
        while True:
            chunk = self._queue.get()
            try:
                if chunk is None:
                    return
                if self._error is None:  # after a failure, chunks are only taken off the queue
                    self.file.write(chunk)
            except BaseException as error:  # handed to the caller's thread
                self._error = error
            finally:
                self._queue.task_done()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error


def prefetched(items: Iterator[Item]) -> Generator[Item, None, None]:
    """``items`` produced by a thread :data:`DEPTH` ahead of the one this side holds (the
    next item is only started once this side takes one: two row groups in memory, not
    three); its exception is raised here where the item would have been. The thread always
    ends with one last entry, which this side takes even when it stops early, so neither
    side can wait on the other for ever."""
    feed: queue.SimpleQueue[tuple[Item | None, BaseException | None, bool]] = queue.SimpleQueue()
    slots = threading.Semaphore(DEPTH)
    stop = threading.Event()
    thread = threading.Thread(target=_produce, args=(items, feed, slots, stop), daemon=True,
                              name="export-reader")
    thread.start()
    last = False
    try:
        while True:
            item, error, last = feed.get()
            if error is not None:
                raise error
            if last:
                return
            slots.release()  # the next item is read while this one is used
            yield item  # type: ignore[misc]  # an item unless last or error
    finally:
        stop.set()
        slots.release()  # wakes the thread if it waits for a slot: it sees stop and ends
        while not last:
            last = feed.get()[2]
        thread.join()


def _produce(items: Iterator[Item],
             feed: queue.SimpleQueue[tuple[Item | None, BaseException | None, bool]],
             slots: threading.Semaphore, stop: threading.Event) -> None:
    try:
        while slots.acquire() and not stop.is_set():
            try:
                item = next(items)
            except StopIteration:
                break
            feed.put((item, None, False))
        feed.put((None, None, True))
    except BaseException as error:  # raised in the consumer's thread
        feed.put((None, error, True))

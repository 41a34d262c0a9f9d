"""Rows to shards without blocking the event loop: batches go to one writer thread.

Workers ``await sink.add(row)``; rows are grouped into batches and handed to a single
thread that feeds the (single-threaded) ``ShardWriter``. The hand-off queue is short, so a
slow disk slows the workers down instead of piling rows up in memory. A shard is also
committed after ``max_age_s`` even when not full, so a crash never loses more than that
much finished work.

A write failure (disk full, I/O error) loses only the rows of the shard being written
(resume captures them again); the sink then stops accepting rows and reports the error
through ``on_fatal`` so the batch can stop instead of generating into the void.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from eagle_tui.core.clock import Clock
from eagle_tui.core.errors import ShardWriteError
from eagle_tui.core.shards.manifest import ShardInfo
from eagle_tui.core.shards.schema import ShardRow
from eagle_tui.core.shards.writer import ShardWriter

log = logging.getLogger(__name__)

HAND_OFF_ROWS = 64
"""Rows handed to the writer thread at once; never more than a shard holds, so a full shard
is committed when its last row is done, not when 64 are."""


@dataclass(slots=True)
class _Batch:
    rows: list[ShardRow] = field(default_factory=list)
    commit: bool = False
    counts: tuple[int, int] = (0, 0)


class ShardSink:
    """Feeds ``writer`` from the event loop through one worker thread."""

    def __init__(
        self,
        writer: ShardWriter,
        clock: Clock,
        *,
        batch_rows: int = HAND_OFF_ROWS,
        max_age_s: float = 120.0,
        counts: Callable[[], tuple[int, int]] = lambda: (0, 0),
        on_commit: Callable[[ShardInfo], None] = lambda info: None,
        on_fatal: Callable[[ShardWriteError], None] = lambda error: None,
    ) -> None:
        self._writer = writer
        self._clock = clock
        self._batch_rows = min(batch_rows, writer.max_rows)
        self._max_age_s = max_age_s
        self._counts = counts  # (failed, rejected) for the manifest, read at each hand-off
        self._on_commit = on_commit
        self._on_fatal = on_fatal
        self._queue: asyncio.Queue[_Batch | None] = asyncio.Queue(maxsize=4)
        self._batch = _Batch()
        self.error: ShardWriteError | None = None
        self.committed_rows = 0

    async def add(self, row: ShardRow) -> None:
        """Accept one row (waits while the writer thread is behind)."""
        if self.error is not None:
            return  # already failing: the row is left for resume, like the rest of its shard
        self._batch.rows.append(row)
        if len(self._batch.rows) >= self._batch_rows:
            await self._hand_off(commit=False)

    async def commit(self) -> None:
        """Commit everything accepted so far as a shard, now."""
        await self._hand_off(commit=True)

    async def _hand_off(self, *, commit: bool) -> None:
        batch, self._batch = self._batch, _Batch()
        batch.commit = commit
        batch.counts = self._counts()
        await self._queue.put(batch)

    async def run(self) -> None:
        """Write batches until ``close``; commits a shard every ``max_age_s`` as well."""
        ticker = asyncio.ensure_future(self._tick())
        try:
            while (batch := await self._queue.get()) is not None:
                if self.error is None:
                    await self._write(batch)
        finally:
            ticker.cancel()

    async def close(self) -> None:
        """Commit what is pending and end ``run`` (call once, after the last ``add``)."""
        await self.commit()
        await self._queue.put(None)

    async def _tick(self) -> None:
        while True:
            await self._clock.sleep(self._max_age_s)
            await self.commit()

    async def _write(self, batch: _Batch) -> None:
        committed: list[ShardInfo] = []
        try:
            await asyncio.to_thread(self._write_sync, batch, committed)
        except ShardWriteError as e:  # on_fatal logs it
            self.error = e
        # Shards committed before a failure in the same batch are saved: count them.
        for info in committed:
            self.committed_rows += info.rows
            self._on_commit(info)
        if self.error is not None:
            self._on_fatal(self.error)

    def _write_sync(self, batch: _Batch, committed: list[ShardInfo]) -> None:
        """In the writer thread: add the rows, commit if asked; ``committed`` collects the
        shards committed (also when a later one fails)."""
        counts = self._writer.manifest.counts
        counts.failed, counts.rejected = batch.counts
        for row in batch.rows:
            if (info := self._writer.add(row)) is not None:
                committed.append(info)
        if batch.commit and (info := self._writer.flush()) is not None:
            committed.append(info)

"""Captured samples for the Inspect view: counts, filtered pages and single rows.

Wraps ``core.shards.reader.ShardReader``; nothing is loaded whole. Counting and filtering read
only the small ``flags`` and ``finish_reason`` columns, one row group at a time, with
Arrow compute; a page reads just the row groups that hold its rows. Calls block: run them
in a worker. A lock serialises use of the reader between workers.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from eagle_tui.core.export.options import RowFilter
from eagle_tui.core.export.tally import KeepCounts, KeepTally
from eagle_tui.core.shards.conversations import conversation_indices, is_multi_turn
from eagle_tui.core.shards.reader import ShardReader
from eagle_tui.core.shards.schema import ShardMetadata, ShardRow

ANY = "any"
CLEAN = "clean"
FLAGGED = "flagged"
PAGE_SIZE = 100
_PAGE_COLUMNS = ["sample_id", "input_ids", "prompt_len", "finish_reason", "flags"]


@dataclass(frozen=True)
class SampleFilter:
    """Which rows to list: ``flag`` is any / clean / flagged / a flag name; ``finish`` is
    any or a finish reason; ``conversation`` (multi-turn batches) lists that conversation's
    turns only, in turn order."""

    flag: str = ANY
    finish: str = ANY
    conversation: str | None = None

    @property
    def is_all(self) -> bool:
        """True when nothing is filtered out."""
        return self.flag == ANY and self.finish == ANY and self.conversation is None


@dataclass(frozen=True)
class SampleRow:
    """One line of the sample table."""

    index: int
    sample_id: str
    prompt_len: int
    output_len: int
    finish_reason: str
    flags: tuple[str, ...]
    conversation_id: str | None = None


@dataclass(frozen=True)
class ShardSummary:
    """What is in the shards: rows, files, problems, counts by flag and finish reason."""

    path: Path
    rows: int
    shards: int
    ignored: tuple[str, ...]
    flag_counts: Mapping[str, int] = field(default_factory=dict)
    finish_counts: Mapping[str, int] = field(default_factory=dict)
    clean: int = 0
    metadata: ShardMetadata | None = None
    export: KeepCounts | None = None


@dataclass(frozen=True)
class SamplePage:
    """One page of the (filtered) table."""

    rows: tuple[SampleRow, ...]
    page: int
    pages: int
    matching: int
    filter: SampleFilter


class SampleSource:
    """Pages of samples under ``path`` (a batch directory, a shards directory or a file)."""

    def __init__(self, path: str | Path) -> None:
        """Open the shards' footers; raises ShardError when ``path`` holds none."""
        self.reader = ShardReader(path)
        self.path = self.reader.path
        self.multi_turn = is_multi_turn(self.reader)
        self._lock = threading.Lock()
        self._filter = SampleFilter()
        self._selected: pa.Array | None = None

    @property
    def rows(self) -> int:
        """Rows in every shard."""
        return self.reader.num_rows

    def summary(self) -> ShardSummary:
        """Counts by flag and finish reason, and what ``eagle-tui export`` would keep with
        its default filter (reads the two small columns once)."""
        flags: Counter[str] = Counter()
        finishes: Counter[str] = Counter()
        clean = 0
        export = KeepTally(RowFilter())
        with self._lock:
            for table in self._light_batches():
                export.add(table)
                flags.update(_value_counts(pc.list_flatten(table["flags"])))
                finishes.update(_value_counts(table["finish_reason"]))
                clean += pc.sum(pc.equal(pc.list_value_length(table["flags"]), 0)).as_py() or 0
            metadata = self.reader.metadata
        ignored = tuple(f"{item.path}: {item.reason}" for item in self.reader.ignored)
        return ShardSummary(
            self.path,
            self.rows,
            len(self.reader.shards),
            ignored,
            dict(flags),
            dict(finishes),
            clean,
            metadata,
            export.counts(),
        )

    def select(self, wanted: SampleFilter) -> int:
        """Use ``wanted`` for the following pages; returns how many rows match."""
        if wanted.is_all:
            self._filter, self._selected = wanted, None
            return self.rows
        with self._lock:
            if wanted.conversation is None:
                selected = self._matching(wanted)
            else:
                selected = self._turns_of(wanted)
        self._selected, self._filter = selected, wanted
        return len(self._selected)

    def _matching(self, wanted: SampleFilter) -> pa.Array:
        """Global indices of the rows the flag and finish filters keep (two small columns)."""
        parts = [
            pc.add(pc.cast(pc.indices_nonzero(_mask(table, wanted)), pa.int64()), offset)
            for offset, table in self._offset_batches()
        ]
        return pa.chunked_array(parts, type=pa.int64()).combine_chunks()

    def _turns_of(self, wanted: SampleFilter) -> pa.Array:
        """The rows of ``wanted.conversation`` in turn order, those the other filters keep
        (the conversation's few indices are matched in Arrow, never a set of every row)."""
        assert wanted.conversation is not None
        turns = pa.array(conversation_indices(self.reader, wanted.conversation), pa.int64())
        if wanted.flag == ANY and wanted.finish == ANY:
            return turns
        return pc.filter(turns, pc.is_in(turns, value_set=self._matching(wanted)))

    def page(self, number: int, size: int = PAGE_SIZE) -> SamplePage:
        """Page ``number`` (0-based, clamped) of the current selection."""
        matching = self.rows if self._selected is None else len(self._selected)
        pages = max(1, -(-matching // size))
        number = max(0, min(number, pages - 1))
        indices = self._indices(number * size, min(matching, (number + 1) * size))
        with self._lock:
            rows = tuple(row for start, count in _runs(indices) for row in self._read(start, count))
        return SamplePage(rows, number, pages, matching, self._filter)

    def sample(self, index: int) -> ShardRow:
        """The whole row at global ``index``."""
        with self._lock:
            return self.reader.row(index)

    def close(self) -> None:
        """Release open files."""
        with self._lock:
            self.reader.close()

    # -- internals -------------------------------------------------------------------------

    def _light_batches(self) -> Iterator[pa.Table]:
        return self.reader.iter_batches(columns=["flags", "finish_reason"])

    def _offset_batches(self) -> Iterator[tuple[int, pa.Table]]:
        offset = 0
        for table in self._light_batches():
            yield offset, table
            offset += table.num_rows

    def _indices(self, start: int, stop: int) -> list[int]:
        if self._selected is None:
            return list(range(start, stop))
        return [int(i) for i in self._selected.slice(start, stop - start).to_pylist()]

    def _read(self, start: int, count: int) -> list[SampleRow]:
        columns = [*_PAGE_COLUMNS, "conversation_id"] if self.multi_turn else _PAGE_COLUMNS
        table = self.reader.page(start, count, columns=columns)
        conversations = (table["conversation_id"].to_pylist() if self.multi_turn
                         else [None] * table.num_rows)
        lengths = pc.list_value_length(table["input_ids"]).to_pylist()
        ids = table["sample_id"].to_pylist()
        prompts = table["prompt_len"].to_pylist()
        finishes = table["finish_reason"].to_pylist()
        flags = table["flags"].to_pylist()
        return [
            SampleRow(
                start + i,
                ids[i],
                prompts[i],
                (lengths[i] or 0) - prompts[i],
                finishes[i],
                tuple(flags[i] or ()),
                conversations[i],
            )
            for i in range(table.num_rows)
        ]


def _value_counts(array: pa.Array | pa.ChunkedArray) -> dict[str, int]:
    counts = pc.value_counts(array).to_pylist()
    return {str(item["values"]): int(item["counts"]) for item in counts}


def _mask(table: pa.Table, wanted: SampleFilter) -> pa.Array:
    """Boolean mask of the rows of ``table`` that ``wanted`` keeps."""
    rows = table.num_rows
    mask = pa.array([True] * rows)
    if wanted.finish != ANY:
        mask = pc.and_(mask, pc.fill_null(pc.equal(table["finish_reason"], wanted.finish), False))
    flags = table["flags"].combine_chunks()
    if wanted.flag == CLEAN:
        mask = pc.and_(mask, pc.equal(pc.list_value_length(flags), 0))
    elif wanted.flag == FLAGGED:
        mask = pc.and_(mask, pc.greater(pc.list_value_length(flags), 0))
    elif wanted.flag != ANY:
        parents = pc.list_parent_indices(flags)
        hit_rows = pc.filter(parents, pc.equal(pc.list_flatten(flags), wanted.flag))
        mask = pc.and_(mask, pc.is_in(pa.array(range(rows), pa.int64()), value_set=hit_rows))
    return pc.fill_null(mask, False)


def _runs(indices: list[int]) -> Iterator[tuple[int, int]]:
    """``(start, count)`` for each run of consecutive indices."""
    if not indices:
        return
    start = previous = indices[0]
    for index in indices[1:]:
        if index != previous + 1:
            yield start, previous - start + 1
            start = index
        previous = index
    yield start, previous - start + 1

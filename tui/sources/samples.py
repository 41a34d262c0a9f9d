"""Captured samples for the Inspect view: counts, filtered pages, single rows, decodings.

Wraps a ``core.samples.job.Job`` (one path, or the ``--shard`` slices of a job read as one)
and asks ``core.samples`` which rows a filter keeps and how a row is decoded, the rules
``eagle-tui inspect`` uses; nothing is loaded whole. Counting and filtering read only the
small ``flags`` and ``finish_reason`` columns, one row group at a time, with Arrow compute;
a page reads just the row groups that hold its rows. Calls block: run them in a worker. A
lock serialises use of the readers between workers.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from eagle_tui.core.export.options import RowFilter
from eagle_tui.core.export.tally import KeepCounts, KeepTally
from eagle_tui.core.samples.decode import (
    Decoding,
    SharedTokenizer,
    TokenizerChoice,
    choose_tokenizer,
    decoding_for,
    fingerprint_warning,
)
from eagle_tui.core.samples.job import open_job
from eagle_tui.core.samples.select import SELECT_COLUMNS, SampleFilter, matching_rows
from eagle_tui.core.shards.conversations import is_multi_turn
from eagle_tui.core.shards.reader import ShardReader
from eagle_tui.core.shards.schema import ShardMetadata, ShardRow

PAGE_SIZE = 100
_PAGE_COLUMNS = ["sample_id", "input_ids", "prompt_len", "finish_reason", "flags"]


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
    job: str = ""  # the --shard slices, when several batch directories were opened


@dataclass(frozen=True)
class SamplePage:
    """One page of the (filtered) table."""

    rows: tuple[SampleRow, ...]
    page: int
    pages: int
    matching: int
    filter: SampleFilter


class SampleSource:
    """Pages of samples under ``paths``: a batch directory, a shards directory or a file,
    or several batch directories (the ``--shard`` slices of one job)."""

    def __init__(self, paths: str | Path | Sequence[str | Path]) -> None:
        """Open the shards' footers; raises ShardError (ConfigError, ExportError for
        directories that are not one job) when they cannot be read."""
        self.job = open_job([paths] if isinstance(paths, str | Path) else list(paths))
        self.path = self.job.path
        self.multi_turn = self.job.multi_turn
        self._lock = threading.Lock()
        self._filter = SampleFilter()
        self._selected: pa.Array | None = None

    @property
    def rows(self) -> int:
        """Rows in every shard."""
        return self.job.num_rows

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
                clean += _empty_lists(table["flags"])
            metadata = self.job.metadata
        ignored = tuple(f"{item.path}: {item.reason}" for item in self.job.ignored)
        return ShardSummary(
            self.path,
            self.rows,
            self.job.shard_count,
            ignored,
            dict(flags),
            dict(finishes),
            clean,
            metadata,
            export.counts(),
            self.job.slices,
        )

    def select(self, wanted: SampleFilter) -> int:
        """Use ``wanted`` for the following pages; returns how many rows match."""
        if wanted.is_all:
            self._filter, self._selected = wanted, None
            return self.rows
        with self._lock:
            selected = matching_rows(self.job, wanted)
        self._selected, self._filter = selected, wanted
        return len(self._selected)

    def page(self, number: int, size: int = PAGE_SIZE) -> SamplePage:
        """Page ``number`` (0-based, clamped) of the current selection."""
        matching = self.rows if self._selected is None else len(self._selected)
        pages = max(1, -(-matching // size))
        number = max(0, min(number, pages - 1))
        indices = self._indices(number * size, min(matching, (number + 1) * size))
        with self._lock:
            rows = tuple(row for start, count in _runs(indices) for row in self._read(start, count))
        return SamplePage(rows, number, pages, matching, self._filter)

    def find(self, text: str) -> int | None:
        """The global index of the row ``text`` names across the whole job: a row number,
        an exact sample id, else the first sample id holding it (case-insensitive)."""
        wanted = text.strip().removeprefix("#")
        if wanted.isdigit():
            return int(wanted) if int(wanted) < self.rows else None
        with self._lock:
            exact = self.job.index_of(wanted)
            if exact is not None:
                return exact
            return self._first_id_holding(wanted.lower())

    def _first_id_holding(self, needle: str) -> int | None:
        for first, reader in self.job.parts():
            offset = first
            for table in reader.iter_batches(columns=["sample_id"]):
                ids = pc.utf8_lower(table["sample_id"])
                hits = pc.indices_nonzero(pc.match_substring(ids, needle))
                if len(hits):
                    return offset + int(hits[0].as_py())
                offset += table.num_rows
        return None

    def position(self, index: int) -> int | None:
        """Where global row ``index`` sits in the current selection (None: filtered out)."""
        if self._selected is None:
            return index
        found = pc.index(self._selected, index).as_py()
        return None if found < 0 else int(found)

    def sample(self, index: int) -> ShardRow:
        """The whole row at global ``index``."""
        with self._lock:
            return self.job.row(index)

    def tokenizer_choice(self, preferred: Path | None) -> TokenizerChoice:
        """The tokenizer to decode with (``core.samples.decode``: ``inspect``'s rule)."""
        return choose_tokenizer(preferred, self.job.manifest, self.job.metadata)

    def decoding(self, index: int, tokenizer: SharedTokenizer | None) -> Decoding:
        """How row ``index`` is split and decoded (its shard's recorded boundary ids)."""
        with self._lock:
            footer = self.job.footer_of(index)
        return decoding_for(footer, self.job.manifest, tokenizer)

    def warning(self, tokenizer: SharedTokenizer) -> str:
        """Why ``tokenizer``'s text may be wrong for these shards ("" when it is theirs)."""
        return fingerprint_warning(tokenizer, self.job.manifest, self.job.metadata)

    def close(self) -> None:
        """Release open files."""
        with self._lock:
            self.job.close()

    # -- internals -------------------------------------------------------------------------

    def _light_batches(self) -> Iterator[pa.Table]:
        for _start, reader in self.job.parts():
            yield from reader.iter_batches(columns=list(SELECT_COLUMNS))

    def _indices(self, start: int, stop: int) -> list[int]:
        if self._selected is None:
            return list(range(start, stop))
        return [int(i) for i in self._selected.slice(start, stop - start).to_pylist()]

    def _read(self, start: int, count: int) -> list[SampleRow]:
        """Rows ``start .. start+count`` of the job, batch by batch (only a multi-turn batch
        has conversations)."""
        rows: list[SampleRow] = []
        for first, reader in self.job.parts():
            lo, hi = max(start, first), min(start + count, first + reader.num_rows)
            if lo < hi:
                rows += _table_rows(reader.page(lo - first, hi - lo, columns=_columns(reader)),
                                    lo, is_multi_turn(reader))
        return rows


def _columns(reader: ShardReader) -> list[str]:
    return [*_PAGE_COLUMNS, "conversation_id"] if is_multi_turn(reader) else _PAGE_COLUMNS


def _table_rows(table: pa.Table, start: int, multi_turn: bool) -> list[SampleRow]:
    """Table rows of ``table``, whose first row is global row ``start``."""
    conversations = (table["conversation_id"].to_pylist() if multi_turn
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


def _empty_lists(lists: pa.Array | pa.ChunkedArray) -> int:
    """How many of ``lists`` are empty (no Python scalar in the comparison: converting one
    imports pandas, ~0.5 s of the Inspect view's first summary)."""
    has_items = pc.cast(pc.list_value_length(lists), pa.bool_())
    return int(pc.sum(pc.invert(has_items)).as_py() or 0)


def _value_counts(array: pa.Array | pa.ChunkedArray) -> dict[str, int]:
    counts = pc.value_counts(array).to_pylist()
    return {str(item["values"]): int(item["counts"]) for item in counts}


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

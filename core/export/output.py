"""The export's data file, written under a temporary name and hashed on the way out.

JSONL (speculators, specforge) is appended row group by row group; parquet gets one row
group per source row group that kept rows. Nothing in the bytes depends on when or where
the export ran, so the same shards and options give byte-identical files.
"""

from __future__ import annotations

import contextlib
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from eagle_tui.core.export.background import BackgroundFile
from eagle_tui.core.export.encode import (
    JSONL_COLUMNS,
    MASK_TYPE,
    jsonl_chunks,
    numpy_array,
    with_loss_mask,
)
from eagle_tui.core.export.options import ExportFormat, MaskStart
from eagle_tui.core.fsio import DROP_BEHIND_BYTES, HashingFile
from eagle_tui.core.shards.schema import (
    ACCEPTANCE_COLUMN,
    ACCEPTANCE_FIELD,
    COLUMNS,
    SHARD_SCHEMA,
    SHARD_SCHEMA_V2,
    TURN_COLUMNS,
)
from eagle_tui.core.shards.writer import COMPRESSION, STATISTICS_COLUMNS

LOSS_MASK_FIELD = pa.field("loss_mask", MASK_TYPE, nullable=False)


def export_schema(*, turns: bool = False, acceptance: bool = False) -> pa.Schema:
    """The parquet file's columns: the shard columns, then (with a multi-turn batch among
    the sources) the turn columns, (with a batch whose shards carry it) the acceptance
    column, then ``loss_mask``. The turn columns are nullable here, because a single-turn
    batch exported alongside has none (its rows read as null, as the shard reader reads
    them); so is the acceptance column, null for the rows of a batch without it."""
    return pa.schema([
        *SHARD_SCHEMA,
        *(SHARD_SCHEMA_V2.field(name).with_nullable(True) for name in TURN_COLUMNS if turns),
        *([ACCEPTANCE_FIELD] if acceptance else []),
        LOSS_MASK_FIELD,
    ])


EXPORT_SCHEMA: pa.Schema = export_schema()
EXPORT_SCHEMA_TURNS: pa.Schema = export_schema(turns=True)
# A dictionary over ~160k distinct token ids costs twice the write time and saves nothing
# once zstd has run (measured in tests/benchmarks/bench_export.py); the other columns keep it.
DICTIONARY_COLUMNS = [name for name in EXPORT_SCHEMA_TURNS.names if name != "input_ids"]


class ExportSink:
    """Writes kept rows in ``fmt`` to ``tmp``; :meth:`finish` syncs and closes it."""

    def __init__(self, tmp: Path, fmt: ExportFormat, mask_start: MaskStart,
                 fingerprint: str, *, turns: bool = False, acceptance: bool = False) -> None:
        self.tmp = tmp
        self.fmt = fmt
        self.mask_start = mask_start
        self.fingerprint = fingerprint
        self.schema = export_schema(turns=turns, acceptance=acceptance)
        self.rows = 0
        self.file = HashingFile(tmp, drop_behind=DROP_BEHIND_BYTES)
        self._out = BackgroundFile(self.file)
        self._helper: ThreadPoolExecutor | None = None
        self._parquet: Any = None
        if fmt == "parquet":
            footer = {b"eagle_tui.export": json.dumps(
                {"mask_start": mask_start, "tokenizer_fingerprint": fingerprint},
                sort_keys=True).encode()}
            try:
                # written directly: zstd in this thread is the limit; the writer thread
                # would take only hashing and writing off it (~4 % of the time)
                self._parquet = pq.ParquetWriter(
                    self.file, self.schema.with_metadata(footer), compression=COMPRESSION,
                    write_statistics=STATISTICS_COLUMNS, use_dictionary=DICTIONARY_COLUMNS,
                )
            except BaseException:
                self.discard()  # the magic bytes may not fit: no descriptor left open
                raise

    @property
    def columns(self) -> list[str]:
        """Shard columns this format needs from every batch (JSONL leaves latency and time
        behind); a multi-turn batch adds :data:`TURN_COLUMNS`, and for parquet a batch with
        the acceptance column adds it (:attr:`wants_acceptance`)."""
        return list(COLUMNS) if self.fmt == "parquet" else list(JSONL_COLUMNS)

    @property
    def wants_acceptance(self) -> bool:
        """True when this file carries the shards' acceptance column (parquet, with a source
        batch that has it): the trainers' JSONL never does."""
        return ACCEPTANCE_COLUMN in self.schema.names

    def write(self, table: pa.Table, keep: pa.BooleanArray) -> None:
        """Append the rows of one row group that ``keep`` marks (``table`` has every shard
        column this format needs)."""
        kept = pc.indices_nonzero(keep).to_pylist()
        if not kept:
            return
        self.rows += len(kept)
        if self._parquet is not None:
            self._write_parquet(table if len(kept) == table.num_rows else kept_rows(table, kept))
        else:
            self._write_jsonl(table, kept)
        # on mimalloc (the pool without jemalloc, core/export/pool.py) the other threads'
        # allocations, freed in this one, otherwise linger: parquet's peak RSS was 302-323 MiB
        # without this, ~270 with it; on jemalloc it changes neither RSS nor time (measured)
        pa.default_memory_pool().release_unused()

    def _write_jsonl(self, table: pa.Table, kept: list[int]) -> None:
        if self._helper is None:
            self._helper = ThreadPoolExecutor(1, thread_name_prefix="export-encoder")
        for chunk in jsonl_chunks(table, kept, self.fmt, self.mask_start, self.fingerprint,
                                  self._helper):
            self._out.write(chunk)

    def _write_parquet(self, table: pa.Table) -> None:
        table = with_loss_mask(self._shard_columns(table), self.mask_start)
        self._parquet.write_table(table.cast(self.schema), row_group_size=table.num_rows)

    def _shard_columns(self, table: pa.Table) -> pa.Table:
        """The shard columns of this file's schema; turn columns null where a batch has none."""
        names = [name for name in self.schema.names if name != "loss_mask"]
        for name in names:
            if name not in table.column_names:
                field = self.schema.field(name)
                nulls = (null_acceptance(table.num_rows) if name == ACCEPTANCE_COLUMN
                         else pa.nulls(table.num_rows, field.type))
                table = table.append_column(field, nulls)
        return table.select(names)

    def finish(self) -> None:
        """Footer (parquet), flush and fsync: the bytes are final and hashed."""
        if self._parquet is not None:
            self._parquet.close()
        self._stop_helper()
        self._out.drain()
        self.file.sync()
        self.file.close()

    def _stop_helper(self) -> None:
        """The encoding thread ends (it holds no work between row groups)."""
        if self._helper is not None:
            self._helper.shutdown()

    def discard(self) -> None:
        """Drop the temporary file (we are failing already: best effort)."""
        self._stop_helper()
        with contextlib.suppress(Exception):
            if self._parquet is not None:
                self._parquet.close()
        with contextlib.suppress(Exception):  # the writer thread's error is already raised
            self._out.drain()
        with contextlib.suppress(OSError):  # closing flushes, and the disk may still be full
            self.file.close()
        self.tmp.unlink(missing_ok=True)


def null_acceptance(rows: int) -> pa.StructArray:
    """``rows`` null acceptance structs (the rows of a batch without the column). Their
    children hold zeros and empty histograms, hidden by the struct's validity: the fields
    are not nullable, so ``pa.nulls`` would not cast to the column's type."""
    kind = ACCEPTANCE_FIELD.type
    zeros = numpy_array(np.zeros(rows, np.int32))
    histograms = pa.ListArray.from_arrays(numpy_array(np.zeros(rows + 1, np.int32)),
                                          numpy_array(np.zeros(0, np.int32)),
                                          type=kind.field("histogram").type)
    children = [histograms if field.name == "histogram" else zeros for field in kind]
    bits = np.packbits(np.ones(rows, np.bool_), bitorder="little")
    missing = pa.Array.from_buffers(pa.bool_(), rows, [None, pa.py_buffer(bits)])
    return pa.StructArray.from_arrays(children, fields=list(kind), mask=missing)


def kept_rows(table: pa.Table, kept: list[int]) -> pa.Table:
    """Rows ``kept`` (ascending, not empty) of ``table``: each run of consecutive rows
    sliced, then all joined in one copy. Arrow's ``filter`` copies a list column id by id:
    ~6 ns per id, against ~0.5 ns this way (4,096-id rows, one in 50 dropped)."""
    rows = np.asarray(kept, dtype=np.int64)
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    starts = rows[np.concatenate(([0], breaks))]
    stops = rows[np.concatenate((breaks - 1, [len(rows) - 1]))] + 1
    runs = [table.slice(start, stop - start)
            for start, stop in zip(starts.tolist(), stops.tolist(), strict=True)]
    return pa.concat_tables(runs).combine_chunks()

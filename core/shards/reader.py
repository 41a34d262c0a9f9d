"""Reading shards without loading them: footers for counts, row groups for data.

``ShardReader(path)`` accepts a batch directory (shards listed in its ``manifest.json``), a
directory of parquet files (``shards/`` or the directory itself, when there is no manifest),
or one parquet file. Opening reads only parquet footers, and checks each file as the
manifest is checked (:mod:`.checks`: footer size, footer values, schema version, columns);
rows are read in batches of at most :data:`BATCH_ROWS` rows (eagle-tui's row groups are never
larger, but a foreign file's row group may hold millions of rows), only the columns asked
for, and every table read is checked for nulls the format does not allow.

With a manifest, only listed shards are read; a listed shard whose size differs from the
listing (or, with ``verify=True``, whose sha256 differs) is skipped and reported in
``ignored``, as are unreadable files. A file that reads but fails the checks (a footer
of another schema version than the first shard's among them) is refused with ShardError
when the manifest lists it or it was named alone, and ignored when it was only found in a
folder; so is a table that holds a forbidden null.

Global row indices run over the shards in manifest (or name) order.
"""

from __future__ import annotations

import bisect
import itertools
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from eagle_tui.core.errors import ShardError
from eagle_tui.core.shards.batchdir.layout import BatchDir
from eagle_tui.core.shards.batchdir.scan import IgnoredFile, listing_problem
from eagle_tui.core.shards.checks import footer_size_problem, null_problem, schema_problem
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.shards.schema import SCHEMA_VERSION, ShardMetadata, ShardRow

OPEN_FILES = 8
CACHED_GROUPS = 2
BATCH_ROWS = 512
"""Rows read at once: the writer's largest row group, so eagle-tui's groups read whole."""


@dataclass(frozen=True, slots=True)
class ShardFile:
    """One readable shard: path, first global row index, rows per row group, and its
    footer's provenance (None: plain parquet)."""

    path: Path
    offset: int
    group_rows: tuple[int, ...]
    footer: ShardMetadata | None = None

    @property
    def rows(self) -> int:
        """Rows in this shard."""
        return sum(self.group_rows)


class ShardReader:
    """Random access and paging over a batch's shards (see the module docstring)."""

    def __init__(self, path: str | Path, *, verify: bool = False) -> None:
        """Find the shards under ``path`` and read their footers; ShardError if ``path``
        does not exist or is a file that is not a readable parquet shard."""
        self.path = Path(path).expanduser()
        if not self.path.exists():
            raise ShardError(f"{self.path} does not exist; pass a batch directory or a shard")
        self.manifest = Manifest.load_optional(self.path) if self.path.is_dir() else None
        self.ignored: list[IgnoredFile] = []
        self.shards = self._open_shards(self._candidates(verify))
        self.num_rows = sum(s.rows for s in self.shards)
        self._starts = [s.offset for s in self.shards]
        self._files: OrderedDict[Path, Any] = OrderedDict()
        self._groups: OrderedDict[tuple[Path, int, int, tuple[str, ...] | None],
                                  pa.Table] = OrderedDict()
        self._ids: dict[str, int] | None = None

    # -- what is there -----------------------------------------------------------------

    @property
    def metadata(self) -> ShardMetadata | None:
        """Provenance from the first shard's footer (None without shards or foreign files)."""
        return self.shards[0].footer if self.shards else None

    def footer_of(self, index: int) -> ShardMetadata | None:
        """Provenance from the footer of the shard holding global row ``index`` (a batch
        resumed with ``--force`` may have changed it between shards)."""
        shard, _ = self.shard_of(index)
        return shard.footer

    def __len__(self) -> int:
        return self.num_rows

    # -- random access -----------------------------------------------------------------

    def row(self, index: int) -> ShardRow:
        """The row at global ``index`` (negative counts from the end); IndexError if none."""
        if index < 0:
            index += self.num_rows
        if not 0 <= index < self.num_rows:
            raise IndexError(f"row {index} out of range (0..{self.num_rows - 1})")
        return ShardRow.from_dict(self.page(index, 1).to_pylist()[0])

    def index_of(self, sample_id: str) -> int | None:
        """Global index of the first row with ``sample_id``; None when absent.

        The first call reads the ``sample_id`` column of every shard (only that column).
        """
        if self._ids is None:
            self._ids = self._build_id_index()
        return self._ids.get(sample_id)

    def get(self, sample_id: str) -> ShardRow | None:
        """The row with ``sample_id``, or None."""
        index = self.index_of(sample_id)
        return None if index is None else self.row(index)

    def shard_of(self, index: int) -> tuple[ShardFile, int]:
        """The shard holding global row ``index`` and the row's position inside it."""
        if not 0 <= index < self.num_rows:
            raise IndexError(f"row {index} out of range (0..{self.num_rows - 1})")
        shard = self.shards[bisect.bisect_right(self._starts, index) - 1]
        return shard, index - shard.offset

    def page(self, start: int, count: int, columns: Sequence[str] | None = None) -> pa.Table:
        """Rows ``start .. start+count`` (clipped to the data) as one table, reading only
        the row groups that hold them and only ``columns`` (all when None)."""
        stop = min(start + max(count, 0), self.num_rows)
        start = max(start, 0)
        pieces = [self._slice(s, g, lo, hi, columns) for s, g, lo, hi in self._spans(start, stop)]
        if not pieces:
            return self._empty(columns)
        return pa.concat_tables(pieces)

    # -- sequential --------------------------------------------------------------------

    def iter_batches(self, columns: Sequence[str] | None = None) -> Iterator[pa.Table]:
        """Every row in order, as tables of ``columns`` of at most :data:`BATCH_ROWS` rows
        (one row group of eagle-tui's), one in memory at a time."""
        for shard in self.shards:
            parquet = self._file(shard.path)
            for group in range(len(shard.group_rows)):
                yield from group_tables(parquet, group, columns, shard.path)

    def iter_rows(self, columns: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
        """Every row as a dict of ``columns`` (all when None)."""
        for table in self.iter_batches(columns):
            yield from table.to_pylist()

    def close(self) -> None:
        """Release open files and caches."""
        self._files.clear()
        self._groups.clear()

    # -- internals ---------------------------------------------------------------------

    def _candidates(self, verify: bool) -> list[Path]:
        """Shard paths to open: a file, the manifest's list, or the parquet files found."""
        if self.path.is_file():
            return [self.path]
        if self.manifest is not None:
            return self._listed(verify)
        shards = BatchDir(self.path).shards
        folder = shards if shards.is_dir() else self.path
        return sorted(folder.glob("*.parquet"))

    def _listed(self, verify: bool) -> list[Path]:
        """Manifest shards whose file exists with the listed size (and sha256 if verify)."""
        assert self.manifest is not None
        paths = []
        for info in self.manifest.shards:
            path = BatchDir(self.manifest.out_dir).shard(info.name)
            problem = listing_problem(path, info.bytes, info.sha256 if verify else None)
            if problem:
                self.ignored.append(IgnoredFile(path, problem, listed=True))
            else:
                paths.append(path)
        return paths

    def _open_shards(self, paths: list[Path]) -> tuple[ShardFile, ...]:
        """Footers of ``paths``, checked. An unreadable file goes to ``ignored``; a file
        that reads but is not the shard format is refused (ShardError) when the manifest
        lists it or it was named alone, and ignored when it was only found in a folder."""
        shards: list[ShardFile] = []
        offset = 0
        for path in paths:
            try:
                parquet = _parquet(path)
            except ShardError as e:
                if self.path.is_file():
                    raise ShardError(f"{path}: {e}") from None
                self.ignored.append(IgnoredFile(path, str(e)))
                continue
            try:
                shard = self._checked(path, parquet, offset, shards[0] if shards else None)
            except ShardError as e:
                if self.path.is_file() or self.manifest is not None:
                    raise ShardError(f"{path} {e}; was it written by eagle-tui, or edited "
                                     "since?") from None
                self.ignored.append(IgnoredFile(path, str(e)))
                continue
            shards.append(shard)
            offset += shard.rows
        return tuple(shards)

    def _checked(self, path: Path, parquet: pq.ParquetFile, offset: int,
                 first: ShardFile | None) -> ShardFile:
        """The shard of ``parquet`` once its footer and columns are the shard format's
        (:mod:`.checks`); ShardError says what is not (without the path)."""
        try:
            footer = ShardMetadata.from_parquet(parquet.schema_arrow.metadata)
        except ShardError as e:
            raise ShardError(f"is not read: {e}") from None
        problem = self._schema_problem(parquet.schema_arrow, footer, first)
        if problem:
            raise ShardError(f"is not an eagle-tui shard: {problem}")
        meta = parquet.metadata
        groups = tuple(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
        return ShardFile(path, offset, groups, footer)

    def _schema_problem(self, schema: pa.Schema, footer: ShardMetadata | None,
                        first: ShardFile | None) -> str | None:
        """Why ``schema`` is not the batch's shard format: its version is the footer's (a
        file without one: the manifest's, else 1), the one of the batch's first shard (the
        batch reads as one table), and its columns are that version's."""
        manifest_version = self.manifest.schema_version if self.manifest is not None else None
        version = (footer.schema_version if footer is not None
                   else manifest_version or SCHEMA_VERSION)
        if first is not None:
            earlier = first.footer.schema_version if first.footer is not None else version
            if version != earlier:
                return (f"it is shard schema {version}, the batch's first shard "
                        f"{first.path.name} schema {earlier}")
        return schema_problem(schema, version)

    def _spans(self, start: int, stop: int) -> Iterator[tuple[ShardFile, int, int, int]]:
        """(shard, row group, first row, end row) within the group for rows start..stop."""
        if start >= stop:
            return
        index = bisect.bisect_right(self._starts, start) - 1
        for shard in self.shards[index:]:
            group_start = shard.offset
            for group, rows in enumerate(shard.group_rows):
                lo, hi = max(start, group_start), min(stop, group_start + rows)
                if lo < hi:
                    yield shard, group, lo - group_start, hi - group_start
                group_start += rows
                if group_start >= stop:
                    return

    def _slice(
        self, shard: ShardFile, group: int, lo: int, hi: int, columns: Sequence[str] | None
    ) -> pa.Table:
        """Rows lo..hi of one row group, read in batches of :data:`BATCH_ROWS` (the batch
        is cached: paging reads it once); a large group is read up to ``hi`` only."""
        pieces = []
        for first in range(lo - lo % BATCH_ROWS, hi, BATCH_ROWS):
            table = self._batch(shard, group, first // BATCH_ROWS, columns)
            pieces.append(table.slice(max(lo - first, 0), min(hi, first + BATCH_ROWS)
                                      - max(lo, first)))
        return pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)

    def _batch(self, shard: ShardFile, group: int, number: int,
               columns: Sequence[str] | None) -> pa.Table:
        """Batch ``number`` of a row group (rows ``number * BATCH_ROWS`` on), cached."""
        key = (shard.path, group, number, tuple(columns) if columns is not None else None)
        table = self._groups.get(key)
        if table is None:
            batches = group_tables(self._file(shard.path), group, columns, shard.path)
            table = next(itertools.islice(batches, number, None))
            self._groups[key] = table
            while len(self._groups) > CACHED_GROUPS:
                self._groups.popitem(last=False)
        self._groups.move_to_end(key)
        return table

    def _file(self, path: Path) -> Any:
        """An open ``ParquetFile`` (a few stay open, least recently used closed first)."""
        parquet = self._files.get(path)
        if parquet is None:
            parquet = pq.ParquetFile(path)
            self._files[path] = parquet
            while len(self._files) > OPEN_FILES:
                self._files.popitem(last=False)
        self._files.move_to_end(path)
        return parquet

    def _empty(self, columns: Sequence[str] | None) -> pa.Table:
        """A zero-row table with the requested columns."""
        from eagle_tui.core.shards.schema import schema_for

        metadata = self.metadata
        schema = schema_for(metadata.schema_version if metadata else SCHEMA_VERSION)
        names = list(columns) if columns is not None else schema.names
        return schema.empty_table().select(names)

    def _build_id_index(self) -> dict[str, int]:
        """sample_id -> first global index, reading only the sample_id column."""
        ids: dict[str, int] = {}
        index = 0
        for table in self.iter_batches(["sample_id"]):
            for sample_id in table.column(0).to_pylist():
                ids.setdefault(str(sample_id), index)
                index += 1
        return ids


def _parquet(path: Path) -> pq.ParquetFile:
    """``path`` opened as parquet (its footer read, once its size is a shard's); ShardError
    says why not."""
    try:
        problem = footer_size_problem(path)
        if problem is None:
            return pq.ParquetFile(path)
    except Exception as e:  # pyarrow: ArrowInvalid / OSError for a damaged file
        raise ShardError(f"not a readable parquet shard: {e}") from e
    raise ShardError(f"not read: {problem}")


def group_tables(parquet: pq.ParquetFile, group: int, columns: Sequence[str] | None,
                 path: Path) -> Iterator[pa.Table]:
    """Row group ``group`` of ``parquet`` as tables of at most :data:`BATCH_ROWS` rows,
    each checked for nulls the format forbids (ShardError naming ``path``)."""
    batches = parquet.iter_batches(batch_size=BATCH_ROWS, row_groups=[group],
                                   columns=_column_list(columns), use_threads=False)
    for batch in batches:
        table = pa.Table.from_batches([batch])
        problem = null_problem(table)
        if problem:
            raise ShardError(f"{path} is not an eagle-tui shard: {problem}")
        yield table


def _column_list(columns: Sequence[str] | None) -> list[str] | None:
    return list(columns) if columns is not None else None


"""Reading shards without loading them: footers for counts, row groups for data.

``ShardReader(path)`` accepts a batch directory (shards listed in its ``manifest.json``), a
directory of parquet files (``shards/`` or the directory itself, when there is no manifest),
or one parquet file. Opening reads only parquet footers; rows are read one row group at a
time (row groups are bounded by the writer), and only the columns asked for.

With a manifest, only listed shards are read; a listed shard whose size differs from the
listing (or, with ``verify=True``, whose sha256 differs) is skipped and reported in
``ignored``, as are unreadable files.

Global row indices run over the shards in manifest (or name) order.
"""

from __future__ import annotations

import bisect
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
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.shards.schema import ShardMetadata, ShardRow

OPEN_FILES = 8
CACHED_GROUPS = 2


@dataclass(frozen=True, slots=True)
class ShardFile:
    """One readable shard: path, first global row index, and rows per row group."""

    path: Path
    offset: int
    group_rows: tuple[int, ...]

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
        self._groups: OrderedDict[tuple[Path, int, tuple[str, ...] | None], pa.Table] = (
            OrderedDict()
        )
        self._ids: dict[str, int] | None = None

    # -- what is there -----------------------------------------------------------------

    @property
    def metadata(self) -> ShardMetadata | None:
        """Provenance from the first shard's footer (None without shards or foreign files)."""
        if not self.shards:
            return None
        raw = self._file(self.shards[0].path).schema_arrow.metadata
        return ShardMetadata.from_parquet(raw)

    def footer_of(self, index: int) -> ShardMetadata | None:
        """Provenance from the footer of the shard holding global row ``index`` (a batch
        resumed with ``--force`` may have changed it between shards)."""
        shard, _ = self.shard_of(index)
        return ShardMetadata.from_parquet(self._file(shard.path).schema_arrow.metadata)

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
        """Every row group in order as a table of ``columns``, one in memory at a time."""
        for shard in self.shards:
            parquet = self._file(shard.path)
            for group in range(len(shard.group_rows)):
                yield parquet.read_row_group(group, columns=_column_list(columns))

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
        """Footers of ``paths``; unreadable ones go to ``ignored`` (or raise for one file)."""
        shards: list[ShardFile] = []
        offset = 0
        for path in paths:
            try:
                meta = pq.ParquetFile(path).metadata
            except Exception as e:  # pyarrow: ArrowInvalid / OSError for a damaged file
                if self.path.is_file():
                    raise ShardError(f"{path} is not a readable parquet shard: {e}") from e
                self.ignored.append(IgnoredFile(path, f"unreadable footer: {e}"))
                continue
            groups = tuple(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
            shards.append(ShardFile(path, offset, groups))
            offset += sum(groups)
        return tuple(shards)

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
        """Rows lo..hi of one row group (the group is cached: paging reads it once)."""
        key = (shard.path, group, tuple(columns) if columns is not None else None)
        table = self._groups.get(key)
        if table is None:
            table = self._file(shard.path).read_row_group(group, columns=_column_list(columns))
            self._groups[key] = table
            while len(self._groups) > CACHED_GROUPS:
                self._groups.popitem(last=False)
        self._groups.move_to_end(key)
        return table.slice(lo, hi - lo)

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
        from eagle_tui.core.shards.schema import SCHEMA_VERSION, schema_for

        metadata = self.metadata
        schema = schema_for(metadata.schema_version if metadata else SCHEMA_VERSION)
        names = list(columns) if columns is not None else schema.names
        return schema.empty_table().select(names)

    def _build_id_index(self) -> dict[str, int]:
        """sample_id -> first global index, reading only the sample_id column."""
        ids: dict[str, int] = {}
        for shard in self.shards:
            column = self._file(shard.path).read(columns=["sample_id"]).column(0)
            for i, sample_id in enumerate(column.to_pylist(), start=shard.offset):
                ids.setdefault(str(sample_id), i)
        return ids


def _column_list(columns: Sequence[str] | None) -> list[str] | None:
    return list(columns) if columns is not None else None


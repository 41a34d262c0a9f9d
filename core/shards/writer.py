"""Writing shards: parquet (zstd), bounded row groups, atomic commit, manifest update.

A shard grows as ``shards/part-NNNNN.parquet.tmp`` one row group at a time (so memory holds
at most one row group). It is committed when it reaches ``max_rows`` rows or ``max_bytes``
bytes on disk (it may pass ``max_bytes`` by at most one compressed row group), or on
:meth:`ShardWriter.flush` / :meth:`ShardWriter.close`. Commit order, each step durable
before the next:

1. parquet footer written, file fsynced, closed;
2. ``os.replace`` to ``part-NNNNN.parquet``, directory fsynced;
3. the shard (rows, sha256, size, first/last id) added to the manifest, which is replaced
   atomically.

A failure at any step (disk full, I/O error) removes the shard file, leaves the manifest
as it was, and raises :class:`ShardWriteError` listing the sample ids that were not saved.
A crash instead leaves at worst a ``.tmp`` file or an unlisted shard; resume ignores both.

Not thread-safe: call it from one thread (e.g. through ``asyncio.to_thread`` one call at a
time).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow.parquet as pq

from eagle_tui.core.errors import ShardWriteError
from eagle_tui.core.fsio import TMP_SUFFIX, HashingFile, describe_os_error, fsync_dir
from eagle_tui.core.shards.batchdir.layout import BatchDir, shard_index
from eagle_tui.core.shards.batchdir.owned import own_subdir
from eagle_tui.core.shards.manifest import Manifest, ShardInfo
from eagle_tui.core.shards.schema import (
    COLUMNS,
    ShardMetadata,
    ShardRow,
    estimated_bytes,
    rows_to_table,
    schema_for,
)

DEFAULT_MAX_ROWS = 10_000
DEFAULT_MAX_BYTES = 256 << 20
DEFAULT_ROW_GROUP_ROWS = 512
DEFAULT_ROW_GROUP_BYTES = 8 << 20
COMPRESSION = "zstd"
# Statistics on the token lists cost space and help no query; keep them for the rest.
STATISTICS_COLUMNS = [name for name in COLUMNS if name != "input_ids"]


class _OpenShard:
    """The shard being written: its temp file, parquet writer and running tallies."""

    def __init__(self, tmp: Path, final: Path, metadata: ShardMetadata, *,
                 acceptance: bool) -> None:
        self.tmp = tmp
        self.final = final
        self.sink = HashingFile(tmp)
        self.version = metadata.schema_version
        self.acceptance = acceptance
        schema = schema_for(self.version, acceptance=acceptance).with_metadata(
            metadata.to_parquet())
        try:
            self.writer: Any = pq.ParquetWriter(
                self.sink, schema, compression=COMPRESSION,
                write_statistics=[name for name in schema.names if name != "input_ids"]
            )
        except BaseException:
            with contextlib.suppress(OSError):  # closing flushes: the disk may be full
                self.sink.close()
            raise
        self.sample_ids: list[str] = []
        self.flagged = 0

    def write_group(self, rows: list[ShardRow]) -> None:
        """Append ``rows`` as one row group."""
        self.sample_ids.extend(row.sample_id for row in rows)
        self.flagged += sum(1 for row in rows if row.flags)
        table = rows_to_table(rows, self.version, acceptance=self.acceptance)
        self.writer.write_table(table, row_group_size=len(rows))

    def finish(self) -> None:
        """Write the footer, fsync and close, then rename into place and fsync the dir."""
        self.writer.close()
        self.sink.sync()
        self.sink.close()
        os.replace(self.tmp, self.final)
        fsync_dir(self.final.parent)

    def info(self) -> ShardInfo:
        """The manifest entry of the finished shard."""
        return ShardInfo(
            name=self.final.name,
            rows=len(self.sample_ids),
            sha256=self.sink.hexdigest(),
            bytes=self.sink.size,
            flagged=self.flagged,
            first_sample_id=self.sample_ids[0],
            last_sample_id=self.sample_ids[-1],
        )

    def discard(self) -> None:
        """Drop every trace of this shard (best effort: we are already failing).

        Never raises for the disk: closing flushes buffered bytes, which fails again on a
        full disk, and the files must go all the same.
        """
        # The writer may be broken mid-write; the file goes anyway.
        with contextlib.suppress(Exception):
            self.writer.close()
        with contextlib.suppress(OSError):
            self.sink.close()
        for path in (self.tmp, self.final):
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)


class ShardWriter:
    """Buffers :class:`ShardRow` s and writes them as committed parquet shards.

    ``manifest`` is the batch's manifest (loaded from ``out_dir`` when not given; the engine
    usually passes its own so counts it sets and shards added here land in one object). Its
    ``acceptance_column`` says whether shards carry the acceptance column: the same for
    every shard of a batch, so its files read as one table.
    """

    def __init__(
        self,
        out_dir: str | Path,
        *,
        metadata: ShardMetadata,
        manifest: Manifest | None = None,
        max_rows: int = DEFAULT_MAX_ROWS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
        row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
    ) -> None:
        """Prepare ``out_dir/shards``; nothing is written until rows arrive."""
        if min(max_rows, max_bytes, row_group_rows, row_group_bytes) < 1:
            raise ValueError("shard and row-group limits must be positive")
        self.out_dir = Path(out_dir)
        self.manifest = manifest if manifest is not None else Manifest.load(self.out_dir)
        self.metadata = metadata
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.row_group_rows = min(row_group_rows, max_rows)
        self.row_group_bytes = min(row_group_bytes, max_bytes)
        self._batch = BatchDir(self.out_dir)
        self.shards_dir = self._batch.shards
        self.out_dir.mkdir(parents=True, exist_ok=True)
        own_subdir(self.shards_dir)  # never a link planted as shards/
        self._next_index = _next_free_index(self.shards_dir, self.manifest)
        self._buffer: list[ShardRow] = []
        self._buffer_bytes = 0
        self._open: _OpenShard | None = None
        self._closed = False

    @property
    def pending_rows(self) -> int:
        """Rows accepted but not yet in a committed shard."""
        written = len(self._open.sample_ids) if self._open else 0
        return written + len(self._buffer)

    def add(self, row: ShardRow) -> ShardInfo | None:
        """Accept one row; returns the shard's entry when this row completed a shard.

        Raises ShardWriteError when a row group or commit fails (the shard is dropped).
        """
        if self._closed:
            raise RuntimeError("ShardWriter.add after close()")
        self._buffer.append(row)
        self._buffer_bytes += estimated_bytes(row)
        if len(self._buffer) >= self.row_group_rows or self._buffer_bytes >= self.row_group_bytes:
            self._write_buffer()
        if self._shard_full():
            return self._commit()
        return None

    def flush(self) -> ShardInfo | None:
        """Commit everything accepted so far as a shard now; None when nothing was pending."""
        if self._open is None and not self._buffer:
            return None
        return self._commit()

    def close(self) -> ShardInfo | None:
        """Flush, then refuse further rows (idempotent)."""
        if self._closed:
            return None
        info = self.flush()
        self._closed = True
        return info

    def abort(self) -> int:
        """Drop the pending rows and the temp file without committing; returns how many."""
        lost = self.pending_rows
        if self._open is not None:
            self._open.discard()
            self._open = None
        self._buffer, self._buffer_bytes = [], 0
        return lost

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # After an error the pending rows may be inconsistent with what the caller
        # believes is saved; dropping them is safe because resume captures them again.
        if exc_type is None:
            self.close()
        else:
            self.abort()
            self._closed = True

    def _shard_full(self) -> bool:
        """True when the open shard has reached a limit."""
        if self._open is None:
            return False
        return self.pending_rows >= self.max_rows or self._open.sink.size >= self.max_bytes

    def _write_buffer(self) -> None:
        """Write the buffer as one row group of the open shard (opening one if needed)."""
        rows, self._buffer, self._buffer_bytes = self._buffer, [], 0
        shard = self._open if self._open is not None else self._start_shard(rows)
        try:
            shard.write_group(rows)
        except Exception as e:  # OSError from the disk, or pyarrow refusing a bad row
            raise self._failed(shard, "write", e) from e

    def _start_shard(self, rows: list[ShardRow]) -> _OpenShard:
        """Open the next ``part-NNNNN.parquet.tmp`` for ``rows`` (lost if it fails)."""
        final = self._batch.shard_file(self._next_index)
        tmp = final.with_name(final.name + TMP_SUFFIX)
        self._next_index += 1
        try:
            self._open = _OpenShard(tmp, final, self.metadata,
                                    acceptance=self.manifest.acceptance_column)
        except Exception as e:  # OSError from the disk (pyarrow passes it through)
            tmp.unlink(missing_ok=True)
            raise ShardWriteError(
                f"cannot create shard {tmp}: {_describe(e)}; {_WHAT_TO_DO}",
                path=tmp,
                lost_sample_ids=[r.sample_id for r in rows],
            ) from e
        return self._open

    def _commit(self) -> ShardInfo:
        """Write what is buffered, finish the open shard and list it in the manifest, or
        undo both."""
        if self._buffer:
            self._write_buffer()
        shard = self._open
        assert shard is not None
        try:
            shard.finish()
            info = shard.info()
        except Exception as e:  # as in _write_buffer: the shard cannot be trusted
            raise self._failed(shard, "finish", e) from e
        self.manifest.add_shard(info)
        try:
            self.manifest.save_atomic()
        except OSError as e:
            self.manifest.remove_shard(info.name)
            raise self._failed(shard, "list in the manifest", e) from e
        self._open = None
        return info

    def _failed(self, shard: _OpenShard, step: str, error: Exception) -> ShardWriteError:
        """Drop ``shard`` entirely and describe what was lost."""
        shard.discard()
        self._open = None
        lost = shard.sample_ids
        return ShardWriteError(
            f"could not {step} shard {shard.final}: {_describe(error)}; {len(lost)} rows were "
            f"not saved (resume captures them again); {_WHAT_TO_DO}",
            path=shard.final,
            lost_sample_ids=lost,
        )


_WHAT_TO_DO = "free disk space (or fix the error) and resume the batch"


def _describe(error: Exception) -> str:
    """Short text for the cause, naming disk-full plainly."""
    return describe_os_error(error)


def _next_free_index(shards_dir: Path, manifest: Manifest) -> int:
    """One past the highest shard index in the manifest or on disk (temp files included),
    so no existing file is ever overwritten."""
    names = [s.name for s in manifest.shards] + [p.name for p in shards_dir.iterdir()]
    indices = [i for i in map(shard_index, names) if i is not None]
    return max(indices, default=-1) + 1


"""``export``: batch directories -> one training file plus its manifest, streamed.

Steps: check the output name is free (or ``force``); open and verify the batches (see
:mod:`.sources`); stream every row group through the row filter into ``OUT.tmp``; write
``OUT.manifest.json.tmp``; then remove an old manifest, rename the data file, rename the
manifest, fsync the directory. The manifest appears last, so a data file is only vouched
for once it is complete; on any failure both temporary files are removed and an existing
output stays as it was. Memory holds a few row groups (the one encoded, the next read ahead,
the previous being written: :mod:`.background`) plus the sample ids while verifying.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from eagle_tui.core.errors import ExportError, ShardError
from eagle_tui.core.export.background import prefetched
from eagle_tui.core.export.manifest import build_manifest, manifest_path_for
from eagle_tui.core.export.options import ExportOptions
from eagle_tui.core.export.output import ExportSink
from eagle_tui.core.export.pool import export_memory_pool
from eagle_tui.core.export.tally import KeepCounts, KeepTally, batch_split
from eagle_tui.core.fsio import TMP_SUFFIX, describe_os_error, fsync_dir, write_atomic
from eagle_tui.core.samples.job import (
    RESTORE,
    SourceBatch,
    SourceShard,
    incomplete_job,
    open_batches,
)
from eagle_tui.core.shards.conversations import is_multi_turn
from eagle_tui.core.shards.reader import group_tables
from eagle_tui.core.shards.schema import ACCEPTANCE_COLUMN, TURN_COLUMNS

Progress = Callable[[int, int], None]
"""Called after each row group with (rows read, rows in all batches)."""


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What was written: the data file, its manifest, counts, size and checksum."""

    path: Path
    manifest_path: Path
    counts: KeepCounts
    bytes: int
    sha256: str
    partial: str | None = None  # which slices of the job are in it and which are missing


def export(directories: Sequence[str | Path], out: str | Path, options: ExportOptions,
           progress: Progress | None = None) -> ExportResult:
    """Export the batches in ``directories`` to ``out`` (see the module docstring).

    Raises ConfigError / ShardError / ExportError before writing anything when the input
    is wrong, ExportError when the output exists (without ``force``) or cannot be written.
    """
    path = Path(out).expanduser().absolute()
    manifest_path = manifest_path_for(path)
    _check_output(path, manifest_path, options.force)
    batches = open_batches(directories)
    _check_outside_sources(path, [batch.directory for batch in batches])
    _check_not_read(path, batches)
    partial = incomplete_job([batch.manifest for batch in batches])
    if partial is not None and not options.allow_partial:
        raise ExportError(f"refusing to export an {partial}, or pass --allow-partial to "
                          "export these slices alone")
    mask_start = options.effective_mask_start
    fingerprint = batches[0].tokenizer_fingerprint
    footer = batches[0].reader.metadata
    tally = KeepTally(options.filter, mask_start, options.max_length,
                      footer.tokenizer.vocab_size if footer else None)
    turns = any(is_multi_turn(batch.reader) for batch in batches)
    acceptance = options.format == "parquet" and any(
        batch.manifest.acceptance_column for batch in batches)
    with export_memory_pool():
        sink = _open_sink(path, options, fingerprint, turns=turns, acceptance=acceptance)
        _fill_and_commit(sink, batches, tally, progress, options, path)
    return ExportResult(path, manifest_path, tally.counts(), sink.file.size,
                        sink.file.hexdigest(), partial)


def _fill_and_commit(sink: ExportSink, batches: list[SourceBatch], tally: KeepTally,
                     progress: Progress | None, options: ExportOptions, path: Path) -> None:
    """Every kept row into ``sink``, then the data file and its manifest put in place; on
    any failure neither is, and the temporary files are gone."""
    manifest_path = manifest_path_for(path)
    tmp_manifest = manifest_path.with_name(manifest_path.name + TMP_SUFFIX)
    try:
        _stream(batches, sink, tally, progress, include_held_out=options.include_held_out)
        try:
            sink.finish()
            manifest = build_manifest(path, options, batches, tally.counts(), sink)
            write_atomic(tmp_manifest, manifest)
            _commit(sink.tmp, path, tmp_manifest, manifest_path)
        except OSError as e:
            raise _write_error(path, e) from e
    except BaseException:
        sink.discard()
        tmp_manifest.unlink(missing_ok=True)
        raise


def _check_output(path: Path, manifest_path: Path, force: bool) -> None:
    if not path.parent.is_dir():
        raise ExportError(f"cannot write {path}: directory {path.parent} does not exist; "
                          "create it first")
    if path.is_dir():
        raise ExportError(f"--out {path} is a directory; name the file to write, e.g. "
                          f"{path / 'train.jsonl'}")
    for target in (path, manifest_path):
        _check_regular(target)
    existing = [p for p in (path, manifest_path) if p.exists()]
    if existing and not force:
        raise ExportError(f"{existing[0]} already exists; pass --force to replace it, or "
                          "choose another --out")


def _check_regular(target: Path) -> None:
    """``--force`` replaces an earlier export, a regular file: never a device, a FIFO or a
    socket (renaming over ``/dev/null`` would replace the system's)."""
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise ExportError(f"cannot write {target}: {describe_os_error(e)}") from e
    if not stat.S_ISREG(mode):
        raise ExportError(f"--out {target} exists and is not a regular file (a device, FIFO "
                          "or socket); name a regular file to write, e.g. train.jsonl")


def _check_outside_sources(path: Path, directories: Sequence[Path]) -> None:
    """An export never writes into a batch it reads: ``--force`` replaces an earlier export,
    never a shard or a manifest (symlinks followed, so no alias slips through)."""
    written = [Path(os.path.realpath(p)) for p in (path, manifest_path_for(path))]
    for directory in directories:
        source = Path(os.path.realpath(directory))
        if any(target.is_relative_to(source) for target in written):
            raise ExportError(f"--out {path} is inside the batch directory {source} being "
                              "exported; write the export outside every source batch, e.g. "
                              f"{source.parent / 'train.jsonl'}")


def _check_not_read(path: Path, batches: Sequence[SourceBatch]) -> None:
    """No file the export writes or removes (the data file, its manifest, their temp files) is
    a file it reads, through any link: a shard may be a symlink, or a hard link, to a file
    outside its batch, and ``--force`` would replace that file (or the clean-up of a stale temp
    file remove it). Compared as the kernel sees the files (device and inode, links followed)
    and by resolved path."""
    read: dict[tuple[object, ...], tuple[Path, Path]] = {}
    for batch in batches:
        for file in (batch.manifest.path, *(shard.path for shard in batch.shards)):
            read.update(dict.fromkeys(_identities(file), (file, batch.directory)))
    for name in _written_names(path):
        for identity in _identities(name):
            if identity in read:
                file, directory = read[identity]
                raise ExportError(f"--out {path}: {name} is the file {file} of the batch "
                                  f"{directory} being exported (through a link); name a file "
                                  "that no source batch reads, e.g. in a new directory")


def _written_names(path: Path) -> tuple[Path, ...]:
    """Every name the export writes, replaces or removes."""
    manifest_path = manifest_path_for(path)
    return tuple(p for name in (path, manifest_path)
                 for p in (name, name.with_name(name.name + TMP_SUFFIX)))


def _identities(path: Path) -> list[tuple[object, ...]]:
    """What a file is: its resolved path, and its device and inode when it exists."""
    found: list[tuple[object, ...]] = [("path", os.path.realpath(path))]
    try:
        info = os.stat(path)
    except OSError:  # nothing there (or nothing this user can reach): only the path tells
        return found
    return [*found, ("inode", info.st_dev, info.st_ino)]


def _open_sink(path: Path, options: ExportOptions, fingerprint: str, *,
               turns: bool, acceptance: bool) -> ExportSink:
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        _clear_stale(tmp)
        return ExportSink(tmp, options.format, options.effective_mask_start, fingerprint,
                          turns=turns, acceptance=acceptance)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise ExportError(f"cannot create {tmp}: {describe_os_error(e)}") from e


def _clear_stale(tmp: Path) -> None:
    """A temp file left by a killed export goes; opening it for writing would follow a
    symlink there, or block on a FIFO."""
    if not tmp.is_symlink() and tmp.exists() and not tmp.is_file():
        raise ExportError(f"{tmp} exists and is not a regular file; remove it and export "
                          "again")
    tmp.unlink(missing_ok=True)


def _stream(batches: list[SourceBatch], sink: ExportSink, tally: KeepTally,
            progress: Progress | None, *, include_held_out: bool = False) -> None:
    """Every row group of every batch, in order, filtered into ``sink`` (the next row group
    is read by a thread while this one is encoded)."""
    columns = sorted(set(sink.columns) | set(tally.columns), key=sink.columns.index)
    total = sum(batch.rows for batch in batches)
    done = 0
    current: SourceBatch | None = None
    # closed on the way out, so a failed write stops the reader at once
    read = _tables(batches, columns, acceptance=sink.wants_acceptance)
    with contextlib.closing(prefetched(read)) as tables:
        for batch, table in tables:
            if batch is not current:
                current = batch
                tally.held_out = None if include_held_out else batch_split(batch.manifest)
            _write(sink, table, tally.decide(table))
            done += table.num_rows
            if progress is not None:
                progress(done, total)


def _tables(batches: list[SourceBatch], columns: list[str], *,
            acceptance: bool = False) -> Generator[tuple[SourceBatch, pa.Table], None, None]:
    """Each row group of each shard of each batch, with its batch (with its acceptance
    column when ``acceptance`` and the batch has one)."""
    for batch in batches:
        read = [*columns, *TURN_COLUMNS] if is_multi_turn(batch.reader) else columns
        if acceptance and batch.manifest.acceptance_column:
            read = [*read, ACCEPTANCE_COLUMN]
        for shard in batch.shards:
            for table in _row_groups(batch, shard, read):
                yield batch, table


def _row_groups(batch: SourceBatch, shard: SourceShard, columns: list[str]) -> Iterator[pa.Table]:
    """One row group at a time, in bounded batches (a foreign shard's group may hold
    millions of rows); a read failure names the shard and the row group."""
    group = 0
    try:
        parquet = pq.ParquetFile(shard.path)
        for group in range(parquet.num_row_groups):
            yield from group_tables(parquet, group, columns, shard.path)
    except (OSError, pa.ArrowException) as e:
        raise ShardError(
            f"shard {shard.path} of batch {batch.directory}: row group {group} cannot be "
            f"read ({e}); {RESTORE}"
        ) from e


def _write(sink: ExportSink, table: pa.Table, keep: pa.BooleanArray) -> None:
    try:
        sink.write(table, keep)
    except OSError as e:
        raise _write_error(sink.tmp, e) from e


def _write_error(path: Path, error: OSError) -> ExportError:
    return ExportError(f"cannot write {path}: {describe_os_error(error)}; nothing was "
                       "replaced. Free disk space (or fix the error) and export again")


def _commit(tmp: Path, path: Path, tmp_manifest: Path, manifest_path: Path) -> None:
    """Put the data file, then its manifest, in place (the old manifest goes first, so it
    never vouches for a file it does not describe)."""
    with contextlib.suppress(FileNotFoundError):
        manifest_path.unlink()
    os.replace(tmp, path)
    os.replace(tmp_manifest, manifest_path)
    fsync_dir(path.parent)

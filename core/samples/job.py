"""A job: what ``inspect``, ``stats``, ``export`` and the Inspect view read, opened one way.

:func:`open_job` takes what a user names: one path (a batch directory, a ``shards/``
directory or one shard file, read as it is), or several batch directories (the ``capture
--shard I/N`` slices of one job), which are verified as :func:`open_batches` verifies an
export's input. A :class:`Job` reads its batches as one: row indices run through them in
the order given.

:func:`open_batches` checks batch directories before anything is read or written: each
must be a batch directory (a manifest); every shard it lists must be present with the
listed size, sha256 and row count; all batches must share one tokenizer fingerprint (ids of
two vocabularies cannot train one drafter); ``--shard`` slices go together only as distinct
slices of one job (same batch config); and no sample id may appear twice (two batches of
the same prompts would train those samples twice).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from eagle_tui.core.errors import ConfigError, ExportError, ShardError
from eagle_tui.core.fsio import describe_os_error
from eagle_tui.core.shards.batchdir.layout import MANIFEST_NAME, SHARDS_DIR, BatchDir
from eagle_tui.core.shards.batchdir.opening import identity_changes
from eagle_tui.core.shards.batchdir.scan import IgnoredFile
from eagle_tui.core.shards.conversations import is_multi_turn
from eagle_tui.core.shards.manifest import Manifest, ShardInfo
from eagle_tui.core.shards.reader import ShardFile, ShardReader
from eagle_tui.core.shards.schema import ShardMetadata, ShardRow

_WRITTEN = f"{MANIFEST_NAME} and {SHARDS_DIR}/"
RESTORE = (
    "restore the file from a copy, or run `eagle-tui capture --resume` on the batch (it "
    "unlists the damaged shard and captures its samples again), then export again"
)


@dataclass(frozen=True, slots=True)
class SourceShard:
    """One listed, verified shard: where it is and what the manifest says of it."""

    path: Path
    name: str
    rows: int
    sha256: str
    bytes: int


@dataclass(frozen=True, slots=True)
class SourceBatch:
    """A verified batch directory with its reader (footers open, nothing else read)."""

    directory: Path
    manifest: Manifest
    reader: ShardReader
    shards: tuple[SourceShard, ...]
    tokenizer_fingerprint: str
    tokenizer_path: str

    @property
    def rows(self) -> int:
        """Rows in the batch's listed shards."""
        return self.reader.num_rows


class Job:
    """``readers`` read as one: global row indices run through them in order. ``slices``
    names the ``--shard`` slices they are (``slices 0, 1 of 2 (all)``; empty without),
    ``missing`` the slices of the job not among them (``("1/2",)``)."""

    def __init__(self, readers: Sequence[ShardReader], slices: str = "",
                 missing: Sequence[str] = ()) -> None:
        if not readers:
            raise ValueError("a job needs at least one reader")
        self.readers = tuple(readers)
        self.slices = slices
        self.missing = tuple(missing)
        self.path: Path = self.readers[0].path
        self._starts: list[int] = []
        total = 0
        for reader in self.readers:
            self._starts.append(total)
            total += reader.num_rows
        self.num_rows = total

    # -- what is there -----------------------------------------------------------------

    @property
    def manifest(self) -> Manifest | None:
        """The first batch's manifest (the batches of a job share their config)."""
        return self.readers[0].manifest

    @property
    def metadata(self) -> ShardMetadata | None:
        """The first shard footer's provenance (the batches share tokenizer and config)."""
        return next((r.metadata for r in self.readers if r.metadata is not None), None)

    @property
    def multi_turn(self) -> bool:
        """True when some batch holds conversation turns (shard schema 2)."""
        return any(is_multi_turn(reader) for reader in self.readers)

    @property
    def shard_count(self) -> int:
        """Readable shards in every batch."""
        return sum(len(reader.shards) for reader in self.readers)

    @property
    def ignored(self) -> list[IgnoredFile]:
        """Files no reader trusted or could read, every batch's."""
        return [item for reader in self.readers for item in reader.ignored]

    def __len__(self) -> int:
        return self.num_rows

    # -- rows --------------------------------------------------------------------------

    def parts(self) -> Iterator[tuple[int, ShardReader]]:
        """``(first global index, reader)`` of each batch, in order."""
        yield from zip(self._starts, self.readers, strict=True)

    def locate(self, index: int) -> tuple[ShardReader, int]:
        """The reader holding global ``index`` (negative counts from the end) and the row's
        index in it; IndexError if there is no such row."""
        if index < 0:
            index += self.num_rows
        if not 0 <= index < self.num_rows:
            raise IndexError(f"row {index} out of range (0..{self.num_rows - 1})")
        position = bisect.bisect_right(self._starts, index) - 1  # skips empty batches
        return self.readers[position], index - self._starts[position]

    def row(self, index: int) -> ShardRow:
        """The row at global ``index``."""
        reader, local = self.locate(index)
        return reader.row(local)

    def shard_of(self, index: int) -> tuple[ShardFile, int]:
        """The shard holding global ``index`` and the row's position in it."""
        reader, local = self.locate(index)
        return reader.shard_of(local)

    def footer_of(self, index: int) -> ShardMetadata | None:
        """The provenance in the footer of the shard holding global ``index``."""
        reader, local = self.locate(index)
        return reader.footer_of(local)

    def index_of(self, sample_id: str) -> int | None:
        """Global index of ``sample_id``, None when no batch has it."""
        for start, reader in self.parts():
            local = reader.index_of(sample_id)
            if local is not None:
                return start + local
        return None

    def close(self) -> None:
        """Release every batch's open files."""
        for reader in self.readers:
            reader.close()


def open_job(paths: Sequence[str | Path]) -> Job:
    """One path as it is (a batch directory, a ``shards/`` directory or a shard file), or
    several batch directories verified as one job (:func:`open_batches`); ShardError,
    ConfigError or ExportError say what is wrong and what to do."""
    try:
        if len(paths) == 1:
            reader = ShardReader(paths[0])
            if reader.manifest is None or reader.manifest.extra.partition is None:
                return Job([reader])
            return Job([reader], check_one_job([reader.manifest]),
                       missing_slices([reader.manifest]))
        batches = open_batches(paths)
    except OSError as e:
        raise unreadable(e) from e
    manifests = [b.manifest for b in batches]
    return Job([b.reader for b in batches], check_one_job(manifests), missing_slices(manifests))


def unreadable(error: OSError) -> ShardError:
    """The one-line error for a batch file or directory that cannot be read (another user's
    0700 directory or 0600 shard, an I/O error), naming it and what to do."""
    where = f" {error.filename}" if error.filename else ""
    hint = ("; check its owner and permissions (ls -l), or run as the user who captured it"
            if isinstance(error, PermissionError) else "")
    return ShardError(f"cannot read{where}: {describe_os_error(error)}{hint}")


def open_batches(directories: Sequence[str | Path]) -> list[SourceBatch]:
    """Open and verify every batch (reads each shard once for its checksum, then the
    ``sample_id`` column); raises ExportError, ShardError or ConfigError saying what,
    where and what to do."""
    if not directories:
        raise ConfigError("export needs at least one batch directory")
    paths = _distinct([Path(d).expanduser().resolve() for d in directories])
    try:
        batches = [_open_batch(path) for path in paths]
    except OSError as e:
        raise unreadable(e) from e
    _check_one_tokenizer(batches)
    check_one_job([b.manifest for b in batches])
    _check_disjoint(batches)
    return batches


def check_one_job(manifests: Sequence[Manifest]) -> str:
    """Batches captured with ``--shard I/N`` go together only as distinct slices of one job:
    the same N, the same batch config (prompt file hash, tokenizer, template, sampling).
    ExportError otherwise; a line saying which slices are here (empty without slices)."""
    slices = [m.extra.partition for m in manifests]
    if not any(slices):
        return ""
    first = manifests[0]
    for manifest, part in zip(manifests, slices, strict=True):
        if part is None:
            raise ExportError(f"{manifest.out_dir} is a whole batch and {first.out_dir} a "
                              "--shard slice; give the slices of one job together, alone")
        _check_same_job(first, manifest)
    return _slice_line(slices)


def missing_slices(manifests: Sequence[Manifest]) -> list[str]:
    """The ``--shard`` slices of the job that ``manifests`` are not (``["1/2"]``); empty
    for whole batches or a complete job. Call after :func:`check_one_job`."""
    parsed = [_parse_slice(m.extra.partition) for m in manifests if m.extra.partition]
    if not parsed:
        return []
    count = parsed[0][1]
    return [f"{i}/{count}" for i in sorted(set(range(count)) - {i for i, _ in parsed})]


def incomplete_job(manifests: Sequence[Manifest]) -> str | None:
    """Why ``manifests`` are only part of a job (None when whole): which ``--shard`` slices
    are here and which are missing, and how to read all of it."""
    missing = missing_slices(manifests)
    if not missing:
        return None
    present = ", ".join(str(m.out_dir) for m in manifests)
    slices = sorted(_parse_slice(m.extra.partition) for m in manifests)
    here = ", ".join(f"{i}/{n}" for i, n in slices)
    one = len(manifests) == 1
    return (f"incomplete job: {present} {'is only slice' if one else 'are only slices'} "
            f"{here}; slice{'' if len(missing) == 1 else 's'} {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} missing (pass every slice's batch "
            "directory together to read the whole job)")


def _parse_slice(text: str | None) -> tuple[int, int]:
    index, count = (int(x) for x in (text or "").split("/"))
    return index, count


def _check_same_job(first: Manifest, other: Manifest) -> None:
    changes = identity_changes(first.config, other.config)
    if changes:
        raise ExportError(f"{first.out_dir} and {other.out_dir} are not slices of one job "
                          f"({'; '.join(changes)})")


def _slice_line(slices: Sequence[str | None]) -> str:
    parsed = [_parse_slice(s) for s in slices]
    counts = {n for _, n in parsed}
    if len(counts) != 1:
        raise ExportError(f"slices {list(slices)} split the job in different numbers of parts")
    indices = sorted(i for i, _ in parsed)
    if len(set(indices)) != len(indices):
        raise ExportError(f"slices {list(slices)}: a slice is given twice")
    [count] = counts
    missing = sorted(set(range(count)) - set(indices))
    gap = f" (missing {', '.join(f'{i}/{count}' for i in missing)})" if missing else " (all)"
    return f"slices {', '.join(str(i) for i in indices)} of {count}{gap}"


def _distinct(paths: list[Path]) -> list[Path]:
    seen: set[Path] = set()
    for path in paths:
        if path in seen:
            raise ConfigError(f"batch directory {path} is given twice; pass it once")
        seen.add(path)
    return paths


def _open_batch(directory: Path) -> SourceBatch:
    manifest = _load_manifest(directory)
    reader = ShardReader(directory, verify=True)
    if reader.ignored:
        problems = "; ".join(str(item) for item in reader.ignored)
        raise ShardError(f"batch {directory} has damaged shards: {problems}; {RESTORE}")
    shards = tuple(_verified_shard(directory, info, file)
                   for info, file in zip(manifest.shards, reader.shards, strict=True))
    config = manifest.config
    for file in reader.shards:
        _check_footer_tokenizer(directory, file, config.tokenizer_fingerprint)
    return SourceBatch(directory, manifest, reader, shards, config.tokenizer_fingerprint,
                       config.tokenizer_path)


def _load_manifest(directory: Path) -> Manifest:
    if not directory.is_dir():
        raise ConfigError(
            f"{directory} is not a directory; pass batch directories (what `eagle-tui capture "
            f"--out` wrote: {_WRITTEN})"
        )
    manifest = BatchDir(directory).manifest
    if not manifest.exists():
        raise ConfigError(
            f"{directory} is not a batch directory: no manifest at {manifest}; "
            f"pass a batch directory (what `eagle-tui capture --out` wrote: {_WRITTEN})"
        )
    try:
        return Manifest.load(directory)
    except ConfigError as e:
        raise ConfigError(f"{directory} cannot be exported: {e}") from e


def _verified_shard(directory: Path, info: ShardInfo, file: ShardFile) -> SourceShard:
    """The manifest entry of ``file``, after checking the file holds the rows it lists."""
    if file.path.name != info.name or file.rows != info.rows:
        raise ShardError(
            f"shard {file.path} of batch {directory} holds {file.rows} rows, its manifest "
            f"lists {info.rows} for {info.name}; {RESTORE}"
        )
    return SourceShard(file.path, info.name, info.rows, info.sha256, info.bytes)


def _check_footer_tokenizer(directory: Path, file: ShardFile, fingerprint: str) -> None:
    """A shard whose footer names another tokenizer than its manifest holds ids of another
    vocabulary (or was edited): exporting it would train on the wrong tokens."""
    footer = file.footer
    if footer is None or footer.tokenizer.fingerprint == fingerprint:
        return
    named = footer.tokenizer.name or footer.tokenizer.path or "a tokenizer"
    raise ShardError(
        f"shard {file.path} of batch {directory} names {named} (fingerprint "
        f"{footer.tokenizer.fingerprint[:12]}…) in its footer, its manifest a tokenizer of "
        f"fingerprint {fingerprint[:12]}…; its ids may belong to another vocabulary: "
        "export its batch's other shards by capturing again, or restore the shard"
    )


def _check_one_tokenizer(batches: list[SourceBatch]) -> None:
    first = batches[0]
    for batch in batches[1:]:
        if batch.tokenizer_fingerprint != first.tokenizer_fingerprint:
            raise ExportError(
                f"batches {first.directory} and {batch.directory} were captured with "
                f"different tokenizers (fingerprints {first.tokenizer_fingerprint[:12]}… from "
                f"{first.tokenizer_path} and {batch.tokenizer_fingerprint[:12]}… from "
                f"{batch.tokenizer_path}); their ids belong to different vocabularies: "
                "export each tokenizer's batches separately"
            )


def _check_disjoint(batches: list[SourceBatch]) -> None:
    """No sample id twice, within or across batches (reads only ``sample_id``)."""
    owner: dict[str, int] = {}
    for number, batch in enumerate(batches):
        for sample_id in _sample_ids(batch):
            previous = owner.setdefault(sample_id, number)
            if previous != number:
                raise _overlap(sample_id, batches[previous], batch)


def _sample_ids(batch: SourceBatch) -> Iterator[str]:
    """Every sample id of ``batch``; ExportError when one repeats inside the batch."""
    seen: set[str] = set()
    for table in _read_ids(batch):
        for sample_id in table.column(0).to_pylist():
            if sample_id in seen:
                raise _overlap(str(sample_id), batch, batch)
            seen.add(sample_id)
            yield str(sample_id)


def _read_ids(batch: SourceBatch) -> Iterator[pa.Table]:
    try:
        yield from batch.reader.iter_batches(["sample_id"])
    except (OSError, pa.ArrowException) as e:
        raise ShardError(f"batch {batch.directory}: a shard cannot be read ({e}); {RESTORE}") \
            from e


def _overlap(sample_id: str, first: SourceBatch, second: SourceBatch) -> ExportError:
    if first is second:
        return ExportError(
            f"sample {sample_id} is stored twice in batch {first.directory}; a batch holds "
            "each sample once, so its shards were copied or merged by hand: remove the extra "
            "shard from the manifest's list (or export a clean copy of the batch)"
        )
    return ExportError(
        f"sample {sample_id} is in both {first.directory} and {second.directory}: the two "
        "batches captured the same prompts, and exporting both would train those samples "
        "twice; export one of them, or each separately"
    )

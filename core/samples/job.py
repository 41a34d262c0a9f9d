"""The batches an export reads, checked before anything is written.

Each directory must be a batch directory (a ``manifest.json``); every shard it lists must be
present with the listed size, sha256 and row count; all batches must share one tokenizer
fingerprint (ids of two vocabularies cannot train one drafter); ``capture --shard`` slices go
together only as distinct slices of one job (same batch config); and no sample id may appear
twice (two batches of the same prompts would train those samples twice). ``stats`` and
``inspect`` given several directories check them the same way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from eagle_tui.core.errors import ConfigError, ExportError, ShardError
from eagle_tui.core.shards.manifest import Manifest, ShardInfo
from eagle_tui.core.shards.reader import ShardFile, ShardReader

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


def open_batches(directories: Sequence[str | Path]) -> list[SourceBatch]:
    """Open and verify every batch (reads each shard once for its checksum, then the
    ``sample_id`` column); raises ExportError, ShardError or ConfigError saying what,
    where and what to do."""
    if not directories:
        raise ConfigError("export needs at least one batch directory")
    paths = _distinct([Path(d).expanduser().resolve() for d in directories])
    batches = [_open_batch(path) for path in paths]
    _check_one_tokenizer(batches)
    check_one_job([b.manifest for b in batches])
    _check_disjoint(batches)
    return batches


# Where a file lives is not what it holds: each node may mount the prompts elsewhere.
_LOCATION_FIELDS = ("prompt_file:", "tokenizer_path:")


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


def _check_same_job(first: Manifest, other: Manifest) -> None:
    changes = [line for line in first.config.differences(other.config)
               if not line.startswith(_LOCATION_FIELDS)]
    if changes:
        raise ExportError(f"{first.out_dir} and {other.out_dir} are not slices of one job "
                          f"({'; '.join(changes)})")


def _slice_line(slices: Sequence[str | None]) -> str:
    parsed = [tuple(int(x) for x in (s or "").split("/")) for s in slices]
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
    return SourceBatch(directory, manifest, reader, shards, config.tokenizer_fingerprint,
                       config.tokenizer_path)


def _load_manifest(directory: Path) -> Manifest:
    if not directory.is_dir():
        raise ConfigError(
            f"{directory} is not a directory; pass batch directories (what `eagle-tui capture "
            "--out` wrote: manifest.json and shards/)"
        )
    try:
        return Manifest.load(directory)
    except ConfigError as e:
        raise ConfigError(
            f"{directory} cannot be exported: {e}. Pass a batch directory (what `eagle-tui "
            "capture --out` wrote: manifest.json and shards/)"
        ) from e


def _verified_shard(directory: Path, info: ShardInfo, file: ShardFile) -> SourceShard:
    """The manifest entry of ``file``, after checking the file holds the rows it lists."""
    if file.path.name != info.name or file.rows != info.rows:
        raise ShardError(
            f"shard {file.path} of batch {directory} holds {file.rows} rows, its manifest "
            f"lists {info.rows} for {info.name}; {RESTORE}"
        )
    return SourceShard(file.path, info.name, info.rows, info.sha256, info.bytes)


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

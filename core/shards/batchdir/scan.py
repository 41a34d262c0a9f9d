"""What a batch directory already holds: which shards are trusted (read only).

A shard is trusted when it is listed in ``manifest.json`` AND its file has the listed size
and sha256 AND its row count matches the listing. Everything else under ``shards/`` is
ignored and reported, never trusted: temp files of shards that never completed, complete
shards the manifest never listed (a crash between rename and manifest update), listed shards
that are missing, truncated or corrupt. Their samples are simply captured again.

:func:`scan_completed` never changes anything on disk; the repairs a resume makes from its
result are in :mod:`.opening`.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from eagle_tui.core.fsio import file_sha256
from eagle_tui.core.shards.batchdir.layout import MANIFEST_NAME, BatchDir, is_temp
from eagle_tui.core.shards.manifest import Manifest, ShardInfo


@dataclass(frozen=True, slots=True)
class IgnoredFile:
    """A file under ``shards/`` that is not trusted, and why; ``listed`` if the manifest
    names it (a resume unlists such entries: ``opening.drop_untrusted``)."""

    path: Path
    reason: str
    listed: bool = False

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass(frozen=True, slots=True)
class ResumeScan:
    """Result of :func:`scan_completed`."""

    manifest: Manifest | None
    sample_ids: frozenset[str]
    trusted: tuple[ShardInfo, ...]
    ignored: tuple[IgnoredFile, ...]


def completed_sample_ids(out_dir: str | Path) -> set[str]:
    """Sample ids stored in the trusted shards of ``out_dir`` (empty for a new directory)."""
    return set(scan_completed(out_dir).sample_ids)


def scan_completed(out_dir: str | Path) -> ResumeScan:
    """Check every shard of ``out_dir`` against its manifest; see the module docstring.

    Reads each listed shard fully once (to checksum it) plus its ``sample_id`` column.
    Raises ConfigError when a manifest exists but cannot be read.
    """
    batch = BatchDir.of(out_dir)
    manifest = Manifest.load_optional(batch.root)
    listed = {s.name: s for s in manifest.shards} if manifest else {}
    ids: set[str] = set()
    trusted: list[ShardInfo] = []
    ignored = [_unlisted(path, manifest) for path in batch.shard_dir_files()
               if path.name not in listed]
    for info in listed.values():
        path = batch.shard(info.name)
        problem, shard_ids = _verify_listed(path, info)
        if problem is not None:
            ignored.append(IgnoredFile(path, problem, listed=True))
            continue
        ids.update(shard_ids)
        trusted.append(info)
    return ResumeScan(manifest, frozenset(ids), tuple(trusted), tuple(ignored))


def _unlisted(path: Path, manifest: Manifest | None) -> IgnoredFile:
    """Why a file the manifest does not list is ignored."""
    if is_temp(path):
        return IgnoredFile(path, "temp file of a shard that never completed")
    if manifest is None:
        return IgnoredFile(path, f"no {MANIFEST_NAME} lists it")
    return IgnoredFile(path, f"not listed in {MANIFEST_NAME} (written but never committed)")


def _verify_listed(path: Path, info: ShardInfo) -> tuple[str | None, list[str]]:
    """(why the listed shard is not trusted or None, its sample ids when trusted)."""
    problem = listing_problem(path, info.bytes, info.sha256)
    if problem is not None:
        return problem, []
    shard_ids = _sample_ids(path)
    if shard_ids is None:
        return "unreadable as parquet despite a matching checksum", []
    if len(shard_ids) != info.rows:
        return f"holds {len(shard_ids)} rows, manifest lists {info.rows}", []
    return None, shard_ids


def listing_problem(path: Path, size: int, sha256: str | None) -> str | None:
    """Why a listed shard cannot be trusted: missing, wrong size, or (when ``sha256`` is
    given) wrong checksum; None when it matches."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return "listed in the manifest but missing"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file (a link?): eagle-tui never writes a shard as one"
    actual = info.st_size
    if actual != size:
        return f"size {actual} bytes, manifest lists {size} (truncated or replaced)"
    if sha256 is None:
        return None
    digest = file_sha256(path)
    if digest != sha256:
        return f"sha256 {digest[:12]}… differs from the manifest's {sha256[:12]}… (corrupt)"
    return None


def _sample_ids(path: Path) -> list[str] | None:
    """The shard's sample ids (reading only that column), None when unreadable."""
    try:
        column = pq.read_table(path, columns=["sample_id"]).column("sample_id")
    except Exception:  # pyarrow raises several types for a damaged file; all mean "unreadable"
        return None
    return [str(v) for v in column.to_pylist()]

"""Opening a batch directory to capture into: a fresh batch, or a resumed one repaired.

- a directory without a manifest starts a fresh batch (refused when it already holds shard
  files: they are not ours to mix with);
- a directory that already holds a batch is only continued with ``resume``, for the same
  ``--shard`` slice and the same shard schema (a fresh batch's shards carry the acceptance
  column; a resumed batch keeps whatever its manifest says, so its files stay one table);
- resume refuses a changed batch config unless ``force`` (and records what changed); a
  moved prompt file or tokenizer directory is the same batch, and its new place is kept;
- only trusted shards count as done (:mod:`.scan`); the repairs leave ``shards/`` holding
  exactly those: untrusted listings are unlisted, leftover temp files deleted, and other
  untrusted files moved to ``untrusted/``, so their rows are captured again once.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from eagle_tui.core.errors import ConfigError
from eagle_tui.core.shards.batchdir.layout import MANIFEST_NAME, BatchDir, is_temp
from eagle_tui.core.shards.batchdir.owned import own_subdir
from eagle_tui.core.shards.batchdir.scan import ResumeScan, scan_completed
from eagle_tui.core.shards.manifest import BatchConfig, Manifest
from eagle_tui.core.shards.schema import MULTI_TURN_SCHEMA_VERSION, SCHEMA_VERSION

log = logging.getLogger(__name__)

# Where a file lives is not what it holds: a moved prompt file or tokenizer with the same
# hash is the same batch (and each node of a job may mount the prompts elsewhere).
_LOCATION_FIELDS = ("prompt_file:", "tokenizer_path:")


@dataclass(frozen=True, slots=True)
class OpenedBatch:
    """A batch directory ready to capture into: its manifest (saved), the scan of what it
    already held (None for a fresh batch), and notes for the log."""

    manifest: Manifest
    scan: ResumeScan | None
    notes: tuple[str, ...]


def open_batch_dir(
    out_dir: Path, config: BatchConfig, *, schema_version: int, partition: str | None,
    resume: bool, force: bool,
) -> OpenedBatch:
    """Start a fresh batch in ``out_dir``, or resume the one there (see the module
    docstring); ConfigError says what is wrong and what to do."""
    batch = BatchDir.of(out_dir)
    scan = scan_completed(batch.root)
    if scan.manifest is None:
        _check_fresh(batch, scan)
        manifest = Manifest(out_dir=batch.root, config=config, schema_version=schema_version,
                            acceptance_column=True)
        manifest.extra.partition = partition
        manifest.save_atomic()
        return OpenedBatch(manifest, None, ())
    if not resume:
        raise ConfigError(
            f"{out_dir} already holds a batch ({scan.manifest.counts.done} rows in "
            f"{len(scan.manifest.shards)} shards); pass --resume to continue it, or choose "
            "another --out"
        )
    manifest = scan.manifest
    _check_partition(manifest, partition)
    _check_schema(manifest, schema_version)
    notes = _reconcile_config(manifest, config, force=force)
    notes += [f"ignored {f}" for f in scan.ignored]
    repair(batch, manifest, scan)
    return OpenedBatch(manifest, scan, tuple(notes))


def repair(batch: BatchDir, manifest: Manifest, scan: ResumeScan) -> None:
    """Make ``shards/`` hold exactly the trusted shards: unlist the untrusted ones (the
    manifest is saved), delete temp files, move other untrusted files aside."""
    dropped = drop_untrusted(manifest, scan)
    manifest.save_atomic()
    remove_temp_files(scan)
    moved = move_aside(scan, batch.untrusted)
    if dropped or moved:
        log.warning("untrusted shard files moved to %s (%s); their rows will be captured "
                    "again", batch.untrusted, ", ".join(p.name for p in moved))


def drop_untrusted(manifest: Manifest, scan: ResumeScan) -> list[str]:
    """Unlist (in memory) the listed shards ``scan`` did not trust; returns their names.

    Call :meth:`Manifest.save_atomic` afterwards. The files stay where they are.
    """
    names = [f.path.name for f in scan.ignored if f.listed]
    for name in names:
        manifest.remove_shard(name)
    return names


def remove_temp_files(scan: ResumeScan) -> list[Path]:
    """Delete the ``.tmp`` shards ``scan`` found (they can never complete); returns them."""
    removed = [f.path for f in scan.ignored if is_temp(f.path)]
    for path in removed:
        path.unlink(missing_ok=True)
    return removed


def move_aside(scan: ResumeScan, into: Path) -> list[Path]:
    """Move untrusted shard files out of ``shards/`` into ``into``; returns where they went.

    Resume never reads them, but anyone globbing ``shards/*.parquet`` would, and an
    unlisted shard (a crash between its rename and the manifest update) holds rows that
    are captured again: left in place they would appear twice.
    """
    moved = []
    for ignored in scan.ignored:
        path = ignored.path
        if is_temp(path) or not path.exists():
            continue
        own_subdir(into)  # a real folder of ours, never a link planted as untrusted/
        target = into / path.name
        counter = 1
        while target.exists():
            target = into / f"{path.stem}.{counter}{path.suffix}"
            counter += 1
        os.replace(path, target)
        moved.append(target)
    return moved


def identity_changes(old: BatchConfig, new: BatchConfig) -> list[str]:
    """One line per batch-config field that differs, leaving out where the prompt file and
    the tokenizer live (same hashes from another place: the same batch)."""
    return [line for line in old.differences(new) if not line.startswith(_LOCATION_FIELDS)]


def _check_fresh(batch: BatchDir, scan: ResumeScan) -> None:
    """A directory without a manifest must not hold shards we would mix with ours."""
    strays = [f for f in scan.ignored if not is_temp(f.path)]
    if strays:
        raise ConfigError(
            f"{batch.root} holds shard files but no {MANIFEST_NAME} (e.g. {strays[0].path}); "
            "it is not a batch directory eagle-tui can resume; choose another --out"
        )


def _check_partition(manifest: Manifest, partition: str | None) -> None:
    """Another slice would mix two nodes' work in one directory."""
    held = manifest.extra.partition
    if held != partition:
        wanted = f"--shard {held}" if held else "no --shard"
        raise ConfigError(f"{manifest.out_dir} holds slice {held or 'all'} of its prompts, "
                          f"not {partition or 'all'}; resume it with {wanted}")


def _check_schema(manifest: Manifest, wanted: int) -> None:
    """A batch's shards share one schema: single- and multi-turn rows never mix."""
    if manifest.schema_version != wanted:
        kinds = {SCHEMA_VERSION: "single-turn (--turns last)",
                 MULTI_TURN_SCHEMA_VERSION: "multi-turn (--turns all)"}
        raise ConfigError(
            f"the batch in {manifest.out_dir} is {kinds.get(manifest.schema_version, '?')}, "
            f"its shards use schema {manifest.schema_version}; resume it with the same "
            "--turns, or capture into another --out (not even --force mixes the two)")


def _reconcile_config(manifest: Manifest, new: BatchConfig, *, force: bool) -> list[str]:
    """Refuse a changed config unless ``force``; with it, adopt the new config and note why."""
    changes = identity_changes(manifest.config, new)
    if not changes:
        manifest.config = new  # same data; pick up moved paths
        return []
    if not force:
        listing = "; ".join(changes)
        raise ConfigError(
            f"the batch in {manifest.out_dir} was captured with a different config "
            f"({listing}); resume with the original prompts, tokenizer and sampling, or "
            "pass --force to add rows made with the new config to the same batch"
        )
    manifest.extra.forced_changes = [*manifest.extra.forced_changes, *changes]
    manifest.config = new
    return [f"forced past a config change: {line}" for line in changes]

"""Opening a batch: prompts, tokenizer, boundary ids, and the output directory's state.

``prepare_batch`` does all the blocking work before the first request (run it in a thread):
it checks the prompt file, loads the tokenizer, resolves the boundary ids and vocabulary
bound, computes the batch config (prompt hash, tokenizer fingerprint, template hash,
sampling) and then either starts a new batch directory or resumes an existing one:

- a directory that already holds a batch is only continued with ``resume``;
- resume refuses a changed batch config unless ``force`` (and records what changed);
- only trusted shards count as done (listed in the manifest, checksum intact); untrusted
  listings are dropped, leftover temp files removed and other untrusted files moved to
  ``untrusted/``, so ``shards/`` holds exactly the trusted shards and their rows are
  captured again.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from msgspec import UNSET, UnsetType

from eagle_tui.core.capture.config import CaptureConfig, sampling_identity
from eagle_tui.core.capture.partsource import PartitionedSource
from eagle_tui.core.capture.prompts import PromptSource, open_prompts
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.fsio import TMP_SUFFIX
from eagle_tui.core.shards.manifest import BatchConfig, IdentityExtra, Manifest, TurnsIdentity
from eagle_tui.core.shards.resume import (
    ResumeScan,
    drop_untrusted,
    remove_temp_files,
    scan_completed,
)
from eagle_tui.core.shards.schema import MULTI_TURN_SCHEMA_VERSION, SCHEMA_VERSION
from eagle_tui.core.tokenizer import BoundaryIds, LoadedTokenizer, load_tokenizer

log = logging.getLogger(__name__)

# Where a file lives is not what it holds: a moved prompt file or tokenizer with the same
# hash is the same batch.
_LOCATION_FIELDS = ("prompt_file:", "tokenizer_path:")

UNTRUSTED_DIR = "untrusted"
"""Where resume moves shard files it does not trust (outside ``shards/``)."""


@dataclass(frozen=True)
class PreparedBatch:
    """Everything the engine needs before dispatching, loaded and checked."""

    source: PromptSource
    tokenizer: LoadedTokenizer
    boundaries: BoundaryIds
    vocab_size: int
    batch_config: BatchConfig
    manifest: Manifest
    done_ids: frozenset[str]
    resumed: bool
    notes: tuple[str, ...]


def prepare_batch(config: CaptureConfig, tokenizer: LoadedTokenizer | None = None) -> (
    PreparedBatch
):
    """Open prompts, tokenizer and output directory; ConfigError/TokenizerError when unusable.

    ``tokenizer`` skips loading (tests and callers that already hold one).
    """
    source = open_prompts(config.prompts)
    if config.partition:
        source = PartitionedSource(source, config.partition)
    if tokenizer is None:
        tokenizer = load_tokenizer(config.tokenizer, trust_remote_code=config.trust_remote_code)
    boundaries = tokenizer.boundary_ids(config.boundary_overrides)
    if not boundaries.stop:
        raise ConfigError(
            f"tokenizer {tokenizer.path} has no end-of-turn or eos token, so generation "
            "could only stop at max_new_tokens; set the 'stop' boundary override"
        )
    vocab_size = tokenizer.vocab_bound(config.model_dir)
    batch_config = make_batch_config(config, source, tokenizer, boundaries, vocab_size)
    manifest, scan, notes = open_output(config, batch_config)
    return PreparedBatch(
        source=source,
        tokenizer=tokenizer,
        boundaries=boundaries,
        vocab_size=vocab_size,
        batch_config=batch_config,
        manifest=manifest,
        done_ids=scan.sample_ids if scan is not None else frozenset(),
        resumed=scan is not None,
        notes=tuple(notes),
    )


def make_batch_config(
    config: CaptureConfig,
    source: PromptSource,
    tokenizer: LoadedTokenizer,
    boundaries: BoundaryIds,
    vocab_size: int,
) -> BatchConfig:
    """What must stay the same between the runs of one batch."""
    return BatchConfig(
        prompt_file=str(source.path.resolve()),
        prompt_sha256=source.sha256(),
        tokenizer_path=str(tokenizer.path),
        tokenizer_fingerprint=tokenizer.fingerprint(),
        template_hash=tokenizer.template_hash(),
        sampling=sampling_identity(config),
        extra=IdentityExtra(
            template_kwargs=dict(sorted(config.template_kwargs.items())),
            boundary_ids=boundaries.as_dict(),
            vocab_size=vocab_size,
        ),
        turns=turns_identity(config),
    )


def turns_identity(config: CaptureConfig) -> TurnsIdentity | UnsetType:
    """The multi-turn part of the batch identity (unset for single-turn batches)."""
    if not config.multi_turn:
        return UNSET
    return TurnsIdentity(history=config.history, on_divergence=config.on_divergence)


def shard_schema_version(config: CaptureConfig) -> int:
    """The shard schema a batch with ``config`` writes (multi-turn rows carry 3 more columns)."""
    return MULTI_TURN_SCHEMA_VERSION if config.multi_turn else SCHEMA_VERSION


def open_output(
    config: CaptureConfig, batch_config: BatchConfig
) -> tuple[Manifest, ResumeScan | None, list[str]]:
    """A new batch directory, or the resumed one with its trusted shards scanned."""
    out_dir = config.out_dir
    scan = scan_completed(out_dir)
    partition = str(config.partition) if config.partition else None
    if scan.manifest is None:
        _check_fresh(out_dir, scan)
        manifest = Manifest(out_dir=out_dir, config=batch_config,
                            schema_version=shard_schema_version(config))
        manifest.extra.partition = partition
        manifest.save_atomic()
        return manifest, None, []
    if not config.resume:
        raise ConfigError(
            f"{out_dir} already holds a batch ({scan.manifest.counts.done} rows in "
            f"{len(scan.manifest.shards)} shards); pass --resume to continue it, or choose "
            "another --out"
        )
    manifest = scan.manifest
    held = manifest.extra.partition
    if held != partition:  # another slice would mix two nodes' work in one directory
        wanted = f"--shard {held}" if held else "no --shard"
        raise ConfigError(f"{out_dir} holds slice {held or 'all'} of its prompts, not "
                          f"{partition or 'all'}; resume it with {wanted}")
    _check_schema(manifest, shard_schema_version(config))
    notes = _reconcile_config(manifest, batch_config, force=config.force)
    notes += [f"ignored {f}" for f in scan.ignored]
    dropped = drop_untrusted(manifest, scan)
    manifest.save_atomic()
    remove_temp_files(scan)
    moved = _move_aside(scan, out_dir / UNTRUSTED_DIR)
    if dropped or moved:
        log.warning("untrusted shard files moved to %s (%s); their rows will be captured "
                    "again", out_dir / UNTRUSTED_DIR, ", ".join(p.name for p in moved))
    return manifest, scan, notes


def _move_aside(scan: ResumeScan, into: Path) -> list[Path]:
    """Move untrusted shard files out of ``shards/``.

    Resume never reads them, but anyone globbing ``shards/*.parquet`` would, and an
    unlisted shard (a crash between its rename and the manifest update) holds rows that
    are captured again: left in place they would appear twice.
    """
    moved = []
    for ignored in scan.ignored:
        path = ignored.path
        if path.name.endswith(TMP_SUFFIX) or not path.exists():
            continue
        into.mkdir(exist_ok=True)
        target = into / path.name
        counter = 1
        while target.exists():
            target = into / f"{path.stem}.{counter}{path.suffix}"
            counter += 1
        os.replace(path, target)
        moved.append(target)
    return moved


def _check_fresh(out_dir: Path, scan: ResumeScan) -> None:
    """A directory without a manifest must not hold shards we would mix with ours."""
    strays = [f for f in scan.ignored if not f.path.name.endswith(".tmp")]
    if strays:
        raise ConfigError(
            f"{out_dir} holds shard files but no manifest.json (e.g. {strays[0].path}); "
            "it is not a batch directory eagle-tui can resume; choose another --out"
        )


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
    changes = [line for line in manifest.config.differences(new)
               if not line.startswith(_LOCATION_FIELDS)]
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

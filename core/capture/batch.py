"""Preparing a batch: prompts, tokenizer, boundary ids, the batch config, the directory.

``prepare_batch`` does all the blocking work before the first request (run it in a thread):
it checks the prompt file, loads the tokenizer, resolves the boundary ids and vocabulary
bound, computes the batch config (prompt hash, tokenizer fingerprint, template hash,
sampling) and then opens the batch directory through its owner,
``core.shards.batchdir.opening`` (a fresh batch, or a resumed one with its untrusted shards
repaired away; the rules are there).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from msgspec import UNSET, UnsetType

from eagle_tui.core.capture.config import CaptureConfig, sampling_identity
from eagle_tui.core.capture.partsource import PartitionedSource
from eagle_tui.core.capture.prompts import PromptSource, open_prompts
from eagle_tui.core.capture.scheduler_env import SchedulerSlice
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.shards.batchdir.opening import open_batch_dir
from eagle_tui.core.shards.manifest import BatchConfig, IdentityExtra, Manifest, TurnsIdentity
from eagle_tui.core.shards.schema import MULTI_TURN_SCHEMA_VERSION, SCHEMA_VERSION
from eagle_tui.core.tokenizer import BoundaryIds, LoadedTokenizer, load_tokenizer
from eagle_tui.core.tokenizer.modelconfig import model_vocab_size

MAX_SCHEDULER_RUNS = 100


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


def prepare_batch(config: CaptureConfig, tokenizer: LoadedTokenizer | None = None, *,
                  scheduler: SchedulerSlice | None = None) -> PreparedBatch:
    """Open prompts, tokenizer and output directory; ConfigError/TokenizerError when unusable.

    ``tokenizer`` skips loading (tests and callers that already hold one); ``scheduler``
    (``--shard auto``) is recorded in the manifest as one more start of the batch.
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
    vocab_size = (model_vocab_size(config.model_dir) if config.model_dir is not None
                  else tokenizer.vocab_bound())
    batch_config = make_batch_config(config, source, tokenizer, boundaries, vocab_size)
    opened = open_batch_dir(
        config.out_dir, batch_config, schema_version=shard_schema_version(config),
        partition=str(config.partition) if config.partition else None,
        resume=config.resume, force=config.force)
    if scheduler is not None:
        record_scheduler_run(opened.manifest, scheduler)
    return PreparedBatch(
        source=source,
        tokenizer=tokenizer,
        boundaries=boundaries,
        vocab_size=vocab_size,
        batch_config=batch_config,
        manifest=opened.manifest,
        done_ids=opened.scan.sample_ids if opened.scan is not None else frozenset(),
        resumed=opened.scan is not None,
        notes=opened.notes,
    )


def record_scheduler_run(manifest: Manifest, scheduler: SchedulerSlice) -> None:
    """Add this start to ``extra.scheduler_runs`` (the newest ``MAX_SCHEDULER_RUNS``: a task
    that crash-loops must not grow the manifest without end) and save the manifest."""
    runs = [*manifest.extra.scheduler_runs, scheduler.run_record(
        datetime.now(UTC).isoformat(timespec="seconds"))]
    manifest.extra.scheduler_runs = runs[-MAX_SCHEDULER_RUNS:]
    manifest.save_atomic()


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
            held_out=config.held_out,
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

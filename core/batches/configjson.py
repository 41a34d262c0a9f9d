"""The stored form of a ``CaptureConfig``: what a registry record keeps to restart its batch.

``StoredConfig`` is a msgspec struct with one field per field of ``CaptureConfig`` except
the API key, which it has no place for: secrets never go into the record. Server URLs are
stored without user info or query (``public_url``); a worker gets the real ones through its
environment (see ``core.batches.secretenv``), and a resume from a new shell needs them
supplied again. ``tests/batches`` checks that the two field lists stay in step.

Decoding checks types (a record whose config has a value of the wrong type is unreadable,
the field named); ``to_config`` then builds the ``CaptureConfig``, whose own checks refuse
values that no longer make sense (ConfigError: start a new batch). Keys written by a newer
eagle-tui are ignored.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
from msgspec import UNSET, UnsetType

from eagle_tui.core.capture.config import CaptureConfig, RetryPolicy
from eagle_tui.core.capture.conversation import MultiTurn
from eagle_tui.core.capture.partition import Partition
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.sampling import SamplingPreset
from eagle_tui.core.urls import public_url
from eagle_tui.core.wire import ENCODER, explain


class StoredConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A ``CaptureConfig`` without its secrets, as JSON stores it (paths as strings)."""

    prompts: str
    out_dir: str
    servers: tuple[str, ...]
    tokenizer: str
    model_dir: str | None = None
    trust_remote_code: bool = False
    max_new_tokens: int = 4096
    presets: tuple[SamplingPreset, ...] = (SamplingPreset(),)
    extra_sampling: dict[str, object] = {}
    template_kwargs: dict[str, object] = {}
    boundary_overrides: dict[str, int] = {}
    concurrency: int = 64
    request_timeout_s: float = 1800.0
    retry: RetryPolicy = msgspec.field(default_factory=RetryPolicy)
    health_interval_s: float = 10.0
    health_retry_s: float = 1.0
    server_down_limit_s: float = 1800.0
    stop_grace_s: float = 30.0
    shard_rows: int = 2000
    shard_max_age_s: float = 120.0
    resume: bool = False
    force: bool = False
    render_chunk: int = 32
    # "I/N" of capture --shard; left out of the JSON when unset (records stay as they were)
    partition: str | msgspec.UnsetType = msgspec.UNSET
    # Absent for single-turn batches, so their records read and write as before.
    turns: MultiTurn | UnsetType = UNSET
    # The held-out split's fraction; absent when the batch declares none.
    held_out: float | UnsetType = UNSET

    @classmethod
    def of(cls, config: CaptureConfig) -> StoredConfig:
        """``config`` without secrets (the API key is dropped, server URLs made public)."""
        return cls(
            prompts=str(config.prompts), out_dir=str(config.out_dir),
            servers=tuple(public_url(url) for url in config.servers),
            tokenizer=str(config.tokenizer),
            model_dir=None if config.model_dir is None else str(config.model_dir),
            trust_remote_code=config.trust_remote_code, max_new_tokens=config.max_new_tokens,
            presets=config.presets, extra_sampling=dict(config.extra_sampling),
            template_kwargs=dict(config.template_kwargs),
            boundary_overrides=dict(config.boundary_overrides), concurrency=config.concurrency,
            request_timeout_s=config.request_timeout_s, retry=config.retry,
            health_interval_s=config.health_interval_s, health_retry_s=config.health_retry_s,
            server_down_limit_s=config.server_down_limit_s, stop_grace_s=config.stop_grace_s,
            shard_rows=config.shard_rows, shard_max_age_s=config.shard_max_age_s,
            resume=config.resume, force=config.force, render_chunk=config.render_chunk,
            partition=msgspec.UNSET if config.partition is None else str(config.partition),
            turns=config.turns,
            held_out=UNSET if config.held_out is None else config.held_out,
        )

    def to_config(self, *, api_key: str | None = None, servers: tuple[str, ...] | None = None,
                  resume: bool | None = None, retry_failed: bool = False) -> CaptureConfig:
        """The ``CaptureConfig``; ``servers``/``api_key`` restore what was kept secret,
        ``resume`` replaces the stored flag, ``retry_failed`` is this run's choice (never
        stored). ConfigError when a value no longer fits."""
        try:
            return CaptureConfig(
                prompts=Path(self.prompts), out_dir=Path(self.out_dir),
                servers=servers or self.servers, tokenizer=Path(self.tokenizer),
                model_dir=None if self.model_dir is None else Path(self.model_dir),
                trust_remote_code=self.trust_remote_code, max_new_tokens=self.max_new_tokens,
                presets=self.presets, extra_sampling=self.extra_sampling,
                template_kwargs=self.template_kwargs, boundary_overrides=self.boundary_overrides,
                concurrency=self.concurrency, request_timeout_s=self.request_timeout_s,
                retry=self.retry, health_interval_s=self.health_interval_s,
                health_retry_s=self.health_retry_s, server_down_limit_s=self.server_down_limit_s,
                stop_grace_s=self.stop_grace_s, shard_rows=self.shard_rows,
                shard_max_age_s=self.shard_max_age_s,
                resume=self.resume if resume is None else resume, force=self.force,
                render_chunk=self.render_chunk, retry_failed=retry_failed, api_key=api_key,
                partition=(None if isinstance(self.partition, msgspec.UnsetType)
                           else Partition.parse(self.partition)),
                turns=self.turns,
                held_out=None if isinstance(self.held_out, UnsetType) else self.held_out,
            )
        except (TypeError, ValueError) as e:
            raise ConfigError(f"stored batch config cannot be used ({e}); start a new batch") from e


_DECODER = msgspec.json.Decoder(StoredConfig)


def config_to_json(config: CaptureConfig) -> bytes:
    """The JSON of ``config`` without secrets (``StoredConfig``)."""
    return ENCODER.encode(StoredConfig.of(config))


def config_from_json(
    data: bytes | str, *, api_key: str | None = None, servers: tuple[str, ...] | None = None,
    resume: bool | None = None,
) -> CaptureConfig:
    """Rebuild a ``CaptureConfig`` from stored JSON; ``servers``/``api_key`` restore what was
    kept secret. ConfigError when the JSON does not fit ``StoredConfig`` (naming the field)
    or no longer fits the config."""
    try:
        stored = _DECODER.decode(data)
    except (msgspec.DecodeError, ConfigError) as e:
        detail = explain(e) if isinstance(e, msgspec.DecodeError) else str(e)
        raise ConfigError(f"stored batch config is unreadable ({detail}); start a new "
                          "batch") from e
    return stored.to_config(api_key=api_key, servers=servers, resume=resume)


__all__ = ["StoredConfig", "config_from_json", "config_to_json"]

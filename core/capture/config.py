"""What a capture batch is: prompts, servers, tokenizer, sampling presets and limits.

``CaptureConfig`` is a frozen msgspec struct, validated on construction and on decoding, so
a running engine never meets a nonsensical value. It is also what a registry record keeps to
restart its batch (``config_to_json``/``config_from_json``; the record embeds it): a value of
the wrong type is refused naming the field, keys written by a newer eagle-tui are ignored.
``sampling_identity`` is the sampling part of what decides whether two runs produce the same
data (the manifest's ``BatchConfig`` holds it with the prompt and tokenizer hashes; resume
refuses when it changes); everything else (servers, concurrency, timeouts) may change
between a run and its resume.

Secrets are never written: a ``ServerURL`` is written as its public text (no user info),
and ``without_secrets`` (what every record holds) drops the API key and the URLs' user info;
unset fields are left out of the JSON, which is how the key and ``--retry-failed`` (each
run's own choice) stay out. A worker gets the real ones through its environment
(``core.batches.secretenv``); ``with_secrets`` puts them back. ``repr`` never shows the API
key (nor, being ``ServerURL``s, the URLs' user info).
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from eagle_tui.core.capture.conversation import DivergencePolicy, HistoryMode, MultiTurn
from eagle_tui.core.capture.partition import Partition
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.sampling import SamplingIdentity, SamplingPreset, check_extra_sampling
from eagle_tui.core.urls import USERINFO_AND_KEY, ServerURL
from eagle_tui.core.wire import ENCODER, decoder, explain

MAX_CONCURRENCY = 4096
"""Most requests in flight per server (``--concurrency``): above SGLang's usual
``--max-running-requests``, and every slot holds a task and a stream buffer."""


def temperature_presets(temperatures: tuple[float, ...], **common: Any) -> tuple[
    SamplingPreset, ...
]:
    """Presets for ``--temperature`` values: one unnamed preset, or ``t<value>`` each."""
    if len(temperatures) == 1:
        return (SamplingPreset("", temperature=temperatures[0], **common),)
    if len(set(temperatures)) != len(temperatures):
        raise ConfigError(f"--temperature values repeat: {temperatures}; give each once")
    return tuple(SamplingPreset(f"t{t:g}", temperature=t, **common) for t in temperatures)


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How often and how patiently a sample is retried after transient errors.

    ``max_attempts`` is the per-sample budget: attempts that reached a server and failed
    transiently. Refused connections do not count (the server is paused instead), so a
    server restart costs a sample at most the attempt that was in flight when it went down.
    """

    max_attempts: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigError("retry budget (max_attempts) must be at least 1")
        if not 0 <= self.base_delay_s <= self.max_delay_s:
            raise ConfigError("retry delays need 0 <= base_delay_s <= max_delay_s")

    def delay(self, failed_attempts: int, rng: random.Random) -> float:
        """Seconds to wait before the next attempt: doubling backoff with "equal jitter".

        Half of the step is fixed and half random, so retries of many samples that failed
        together (a server restart) spread out instead of arriving as one wave.
        """
        step = min(self.max_delay_s, self.base_delay_s * 2.0 ** max(0, failed_attempts - 1))
        return step / 2 + rng.uniform(0, step / 2)


class CaptureConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Everything one capture batch needs. Validated on construction (ConfigError).

    ``repr`` never shows the API key (nor the URLs' user info).
    """

    prompts: Path
    out_dir: Path
    servers: tuple[ServerURL, ...]
    tokenizer: Path
    model_dir: Path | None = None
    trust_remote_code: bool = False
    max_new_tokens: int = 4096
    presets: tuple[SamplingPreset, ...] = (SamplingPreset(),)
    extra_sampling: dict[str, object] = {}  # any JSON values
    template_kwargs: dict[str, object] = {}
    boundary_overrides: dict[str, int] = {}
    concurrency: int = 64
    request_timeout_s: float = 1800.0
    retry: RetryPolicy = RetryPolicy()
    health_interval_s: float = 10.0
    health_retry_s: float = 1.0
    server_down_limit_s: float = 1800.0
    stop_grace_s: float = 30.0
    shard_rows: int = 2000
    shard_max_age_s: float = 120.0
    resume: bool = False
    force: bool = False
    # This run's own choice (``--retry-failed``): unset in every record, never carried on.
    retry_failed: bool | UnsetType = UNSET
    render_chunk: int = 32
    # Unset: the whole prompt set; else ``--shard I/N``, written as "I/N".
    partition: Partition | UnsetType = UNSET
    # Unset: single-turn, the last assistant turn only (stored configs then stay as before).
    turns: MultiTurn | UnsetType = UNSET
    # Ask a router's listed workers directly (health, metrics, info, abort), API key
    # included (``--trust-router-workers``); unset in records of batches without it.
    trust_router_workers: bool | UnsetType = UNSET
    # The held-out split's fraction (docs/acceptance.md): captured, left out of export.
    held_out: float | UnsetType = UNSET
    # Given to the engine's clients only; unset in every record (``without_secrets``).
    api_key: str | UnsetType = UNSET

    def __post_init__(self) -> None:
        self._check_servers()
        self._check_presets()
        check_extra_sampling(self.extra_sampling)
        self._check_turns()
        positive = {
            "max_new_tokens": self.max_new_tokens,
            "concurrency": self.concurrency,
            "request_timeout_s": self.request_timeout_s,
            "health_interval_s": self.health_interval_s,
            "health_retry_s": self.health_retry_s,
            "server_down_limit_s": self.server_down_limit_s,
            "shard_rows": self.shard_rows,
            "shard_max_age_s": self.shard_max_age_s,
            "render_chunk": self.render_chunk,
        }
        for name, value in positive.items():
            if not (value > 0 and math.isfinite(value)):
                raise ConfigError(f"capture setting {name} must be > 0 and finite, got {value!r}")
        if not (self.stop_grace_s >= 0 and math.isfinite(self.stop_grace_s)):
            raise ConfigError("stop grace period must be >= 0 seconds and finite")
        if self.concurrency > MAX_CONCURRENCY:
            raise ConfigError(f"concurrency {self.concurrency} is above {MAX_CONCURRENCY} "
                              "requests in flight per server; lower --concurrency")
        if not isinstance(self.held_out, UnsetType) and not 0 < self.held_out < 1:
            raise ConfigError(f"--held-out must be a fraction between 0 and 1 (e.g. 0.05), "
                              f"got {self.held_out:g}")

    def _check_servers(self) -> None:
        if not self.servers:
            raise ConfigError("no server given; pass --server URL (repeat it for several)")
        for url in self.servers:
            if url.userinfo and self.api_key:
                raise ConfigError(f"--server {url.shown}: {USERINFO_AND_KEY}")
        if len(set(self.servers)) != len(self.servers):
            raise ConfigError(f"a server is listed twice in {[u.public for u in self.servers]}")

    def _check_presets(self) -> None:
        names = [p.name for p in self.presets]
        if not names:
            raise ConfigError("at least one sampling preset is needed")
        if len(set(names)) != len(names):
            raise ConfigError(f"sampling preset names repeat: {names}")
        if len(names) > 1 and "" in names:
            raise ConfigError("with several sampling presets every one needs a name")

    def _check_turns(self) -> None:
        if self.history not in ("dataset", "model"):
            raise ConfigError(f"--history must be 'dataset' or 'model', got {self.history!r}")
        if self.on_divergence not in ("end", "dataset"):
            raise ConfigError(f"--on-divergence must be 'end' or 'dataset', "
                              f"got {self.on_divergence!r}")

    @property
    def multi_turn(self) -> bool:
        """True when every assistant turn of a conversation is generated (``--turns all``)."""
        return not isinstance(self.turns, UnsetType)

    @property
    def history(self) -> HistoryMode:
        """Whose earlier answers a turn's history holds (``dataset`` when single-turn)."""
        return "dataset" if isinstance(self.turns, UnsetType) else self.turns.history

    @property
    def on_divergence(self) -> DivergencePolicy:
        """What a diverged tool call does to the conversation (``--on-divergence``)."""
        return "end" if isinstance(self.turns, UnsetType) else self.turns.on_divergence

    def without_secrets(self) -> CaptureConfig:
        """What a record keeps: server URLs without user info, no API key, no
        ``--retry-failed``."""
        return msgspec.structs.replace(
            self, servers=tuple(url.without_userinfo for url in self.servers), api_key=UNSET,
            retry_failed=UNSET)

    def with_secrets(self, *, api_key: str | None = None,
                     servers: tuple[ServerURL, ...] | None = None) -> CaptureConfig:
        """This config with what a record does not keep: the API key, and the server URLs
        as given (with their credentials) when ``servers`` is set."""
        return msgspec.structs.replace(self, api_key=api_key or UNSET,
                                       servers=servers or self.servers)

    def __repr__(self) -> str:
        shown = (f"{name}={getattr(self, name)!r}" for name in self.__struct_fields__
                 if name != "api_key")
        return f"CaptureConfig({', '.join(shown)})"

    @property
    def total_concurrency(self) -> int:
        """Requests in flight at most, over all servers."""
        return self.concurrency * len(self.servers)


_DECODER = decoder(CaptureConfig)


def config_to_json(config: CaptureConfig) -> bytes:
    """The JSON of ``config`` without secrets (``without_secrets``)."""
    return ENCODER.encode(config.without_secrets())


def config_from_json(
    data: bytes | str, *, api_key: str | None = None,
    servers: tuple[ServerURL, ...] | None = None,
    resume: bool | None = None,
) -> CaptureConfig:
    """A ``CaptureConfig`` from stored JSON; ``servers``/``api_key`` restore what was kept
    secret, ``resume`` replaces the stored flag. ConfigError when the JSON does not fit
    (naming the field) or a value no longer makes sense."""
    try:
        stored = _DECODER.decode(data)
    except (msgspec.DecodeError, ConfigError) as e:
        detail = explain(e) if isinstance(e, msgspec.DecodeError) else str(e)
        raise ConfigError(f"stored batch config is unreadable ({detail}); start a new "
                          "batch") from e
    config = stored.with_secrets(api_key=api_key, servers=servers)
    return config if resume is None else msgspec.structs.replace(config, resume=resume)


def sampling_identity(config: CaptureConfig) -> SamplingIdentity:
    """The sampling part of the batch identity of ``config``."""
    return SamplingIdentity(max_new_tokens=config.max_new_tokens, presets=config.presets,
                            extra=dict(sorted(config.extra_sampling.items())))


class Redactor:
    """Masks the API key in text before it is written anywhere (a server may echo it back in
    an error). Server URLs need no scrubbing: every message names a ``ServerURL``'s public
    form, and the user info reaches the HTTP client only."""

    def __init__(self, config: CaptureConfig) -> None:
        self._key = config.api_key or None

    def clean(self, text: str) -> str:
        """``text`` with the API key masked."""
        return text.replace(self._key, "***") if self._key else text

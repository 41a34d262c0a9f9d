"""What a capture batch is: prompts, servers, tokenizer, sampling presets and limits.

``CaptureConfig`` is frozen and validated on construction, so a running engine never meets
a nonsensical value. ``sampling_identity`` is the sampling part of what decides whether two
runs produce the same data (the manifest's ``BatchConfig`` holds it with the prompt and
tokenizer hashes; resume refuses when it changes); everything else (servers, concurrency,
timeouts) may change between a run and its resume.

The API key is a field only so the engine can hand it to its clients: it is excluded from
``repr``, from the batch identity and from everything the tool writes.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from msgspec import UNSET, UnsetType

from eagle_tui.core.capture.conversation import DivergencePolicy, HistoryMode, MultiTurn
from eagle_tui.core.capture.partition import Partition
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.sampling import SamplingIdentity, SamplingPreset
from eagle_tui.core.urls import public_url, url_error


def temperature_presets(temperatures: tuple[float, ...], **common: Any) -> tuple[
    SamplingPreset, ...
]:
    """Presets for ``--temperature`` values: one unnamed preset, or ``t<value>`` each."""
    if len(temperatures) == 1:
        return (SamplingPreset("", temperature=temperatures[0], **common),)
    if len(set(temperatures)) != len(temperatures):
        raise ConfigError(f"--temperature values repeat: {temperatures}; give each once")
    return tuple(SamplingPreset(f"t{t:g}", temperature=t, **common) for t in temperatures)


@dataclass(frozen=True)
class RetryPolicy:
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


@dataclass(frozen=True, repr=False)
class CaptureConfig:
    """Everything one capture batch needs. Validated on construction (ConfigError).

    ``repr`` shows server URLs without credentials and never the API key.
    """

    prompts: Path
    out_dir: Path
    servers: tuple[str, ...]
    tokenizer: Path
    model_dir: Path | None = None
    trust_remote_code: bool = False
    max_new_tokens: int = 4096
    presets: tuple[SamplingPreset, ...] = (SamplingPreset(),)
    extra_sampling: Mapping[str, object] = field(default_factory=dict)  # any JSON values
    template_kwargs: Mapping[str, object] = field(default_factory=dict)
    boundary_overrides: Mapping[str, int] = field(default_factory=dict)
    concurrency: int = 64
    request_timeout_s: float = 1800.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    health_interval_s: float = 10.0
    health_retry_s: float = 1.0
    server_down_limit_s: float = 1800.0
    stop_grace_s: float = 30.0
    shard_rows: int = 2000
    shard_max_age_s: float = 120.0
    resume: bool = False
    force: bool = False
    retry_failed: bool = False
    render_chunk: int = 32
    partition: Partition | None = None
    # Unset: single-turn, the last assistant turn only (stored configs then stay as before).
    turns: MultiTurn | UnsetType = UNSET
    # The held-out split's fraction (docs/acceptance.md): captured, left out of export.
    held_out: float | None = None
    api_key: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check_servers()
        self._check_presets()
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
            if not value > 0:
                raise ConfigError(f"capture setting {name} must be > 0, got {value!r}")
        if self.stop_grace_s < 0:
            raise ConfigError("stop grace period must be >= 0 seconds")
        if self.held_out is not None and not 0 < self.held_out < 1:
            raise ConfigError(f"--held-out must be a fraction between 0 and 1 (e.g. 0.05), "
                              f"got {self.held_out:g}")

    def _check_servers(self) -> None:
        if not self.servers:
            raise ConfigError("no server given; pass --server URL (repeat it for several)")
        for url in self.servers:
            if (problem := url_error(url, has_key=bool(self.api_key))) is not None:
                raise ConfigError(problem)
        if len(set(self.servers)) != len(self.servers):
            raise ConfigError(f"a server is listed twice in {list(self.servers)}")

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

    def __repr__(self) -> str:
        shown = []
        for item in fields(self):
            if item.name == "api_key":
                continue
            value = getattr(self, item.name)
            if item.name == "servers":
                value = tuple(public_url(url) for url in value)
            shown.append(f"{item.name}={value!r}")
        return f"CaptureConfig({', '.join(shown)})"

    @property
    def total_concurrency(self) -> int:
        """Requests in flight at most, over all servers."""
        return self.concurrency * len(self.servers)


def sampling_identity(config: CaptureConfig) -> SamplingIdentity:
    """The sampling part of the batch identity of ``config``."""
    return SamplingIdentity(max_new_tokens=config.max_new_tokens, presets=config.presets,
                            extra=dict(sorted(config.extra_sampling.items())))


class Redactor:
    """Scrubs credentials out of text before it is written anywhere.

    Error messages quote the URL they failed on; a URL given with user info or a query
    would carry a secret into ``failures.jsonl`` or a log. The API key itself is replaced
    too, wherever it might appear.
    """

    def __init__(self, config: CaptureConfig) -> None:
        self._pairs = [(url.rstrip("/"), public_url(url)) for url in config.servers]
        self._pairs = [(raw, clean) for raw, clean in self._pairs if raw != clean]
        self._key = config.api_key

    def clean(self, text: str) -> str:
        """``text`` with every raw server URL made public and the API key masked."""
        for raw, clean in self._pairs:
            text = text.replace(raw, clean)
        if self._key:
            text = text.replace(self._key, "***")
        return text

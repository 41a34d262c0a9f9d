"""How a batch samples: its presets (one row per prompt each) and the sampling identity the
manifest stores (what changes the generated rows, so resume can refuse a changed one).

Shared by the capture engine, which sends these parameters, and the shard manifest, which
records them; it sits in the base layer so neither has to import the other.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import msgspec

from eagle_tui.core.errors import ConfigError
from eagle_tui.core.sample_ids import variant_id

# A preset name becomes part of a sample id (``<id>#<name>``) and of file names in logs.
_PRESET_NAME = re.compile(r"^[A-Za-z0-9_.+-]{0,32}$")


@dataclass(frozen=True)
class SamplingPreset:
    """One way of sampling every prompt; several presets give one row each per prompt.

    ``name`` is the sample-id suffix (``<sample_id>#<name>``); the empty name means no
    suffix and is only allowed when it is the single preset.
    """

    name: str = ""
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if not _PRESET_NAME.match(self.name):
            raise ConfigError(
                f"sampling preset name {self.name!r} may use only letters, digits and _.+- "
                "(at most 32); it becomes the sample-id suffix"
            )
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ConfigError(f"preset {self.name!r}: temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"preset {self.name!r}: top_p must be in (0, 1]")
        if not 0 <= self.min_p <= 1:
            raise ConfigError(f"preset {self.name!r}: min_p must be in [0, 1]")
        if self.top_k == 0 or self.top_k < -1:
            raise ConfigError(f"preset {self.name!r}: top_k must be -1 (all) or >= 1")

    def sample_id(self, base: str) -> str:
        """The row's sample id for the prompt whose id is ``base`` (``<base>#<name>``)."""
        return variant_id(base, preset=self.name or None)


class SamplingIdentity(msgspec.Struct, frozen=True):
    """The sampling part of a batch's identity (what changes the generated rows), as the
    manifest stores it: ``max_new_tokens``, the presets, and the extra SGLang sampling
    parameters (any JSON values, passed through)."""

    max_new_tokens: int
    presets: tuple[SamplingPreset, ...]
    extra: dict[str, object] = {}

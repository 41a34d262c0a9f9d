"""How a batch samples: its presets (one row per prompt each) and the sampling identity the
manifest stores (what changes the generated rows, so resume can refuse a changed one).

Shared by the capture engine, which sends these parameters, and the shard manifest, which
records them; it sits in the base layer so neither has to import the other.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
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


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: object) -> bool:
    return isinstance(value, str)


def _texts(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(map(_text, value)))


def _wholes(value: object) -> bool:
    return isinstance(value, list) and all(map(_whole, value))


def _switch(value: object) -> bool:
    return isinstance(value, bool)


def _bias(value: object) -> bool:
    return isinstance(value, dict) and all(map(_number, value.values()))


def _object(value: object) -> bool:
    return isinstance(value, dict)


_KINDS: dict[Callable[[object], bool], str] = {
    _number: "a finite number", _whole: "a whole number", _text: "a string",
    _texts: "a string or a list of strings", _wholes: "a list of whole numbers",
    _switch: "true or false", _bias: "an object of token id -> number",
    _object: "an object",
}

SAMPLING_KEY_TYPES: dict[str, Callable[[object], bool]] = {
    "temperature": _number, "top_p": _number, "top_k": _whole, "min_p": _number,
    "frequency_penalty": _number, "presence_penalty": _number,
    "repetition_penalty": _number, "max_new_tokens": _whole, "min_new_tokens": _whole,
    "n": _whole, "sampling_seed": _whole, "stream_interval": _whole,
    "stop": _texts, "stop_regex": _texts, "stop_token_ids": _wholes,
    "ignore_eos": _switch, "skip_special_tokens": _switch,
    "spaces_between_special_tokens": _switch, "no_stop_trim": _switch,
    "json_schema": _text, "regex": _text, "ebnf": _text, "structural_tag": _text,
    "logit_bias": _bias, "custom_params": _object,
}
"""The type SGLang's ``SamplingParams`` takes for each key it knows: a value of another type
is refused by the server on every request (400), so it is refused before anything is sent.
Other keys pass through as given (a newer SGLang may know them)."""


def check_extra_sampling(extra: Mapping[str, object]) -> None:
    """ConfigError naming the first known key whose value has the wrong type."""
    for key, value in extra.items():
        check = SAMPLING_KEY_TYPES.get(key)
        if check is not None and not check(value):
            raise ConfigError(f"sampling parameter {key} must be {_KINDS[check]}, not "
                              f"{_shown_json(value)}; every request would be refused (400)")


def _shown_json(value: object) -> str:
    text = json.dumps(value, default=repr)  # NaN as NaN: what the option said
    return text if len(text) <= 60 else f"{text[:57]}..."

"""Boundary token ids (think, end of think, stop, tool calls), resolved by token name.

Ids are looked up by *name* in whatever tokenizer is loaded (names from ``core.kimi``), so a
checkpoint whose ids differ still works; a config may override any of them. Names the
tokenizer does not know give ``None`` / empty rather than an error; :meth:`BoundaryIds.missing`
says which boundaries are unresolved.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from eagle_tui.core import kimi
from eagle_tui.core.errors import ConfigError

# Override keys a config may use, each naming one boundary token. The token text itself
# (e.g. "<think>") is accepted as a key too.
OVERRIDE_KEYS: Mapping[str, str] = {
    "think": kimi.THINK_TOKEN,
    "think_end": kimi.THINK_END_TOKEN,
    "stop": kimi.STOP_TOKEN,
    **{name.strip("<|>"): name for name in kimi.TOOL_CALL_TOKENS},
}

TokenLookup = Callable[[str], "int | None"]


@dataclass(frozen=True, slots=True)
class BoundaryIds:
    """The token ids that mark reasoning, turn ends and tool calls in one tokenizer.

    ``stop`` holds the turn-end token (``<|im_end|>``) first, then the tokenizer's eos when it
    differs; ``tool_call`` holds the tool-call tokens that exist. ``unresolved`` lists the token
    names that were neither found in the tokenizer nor overridden.
    """

    think: int | None
    think_end: int | None
    stop: tuple[int, ...]
    tool_call: frozenset[int]
    unresolved: tuple[str, ...] = field(default=())

    def missing(self) -> tuple[str, ...]:
        """Names of the boundaries that resolved to nothing (``think``, ``stop``, ...)."""
        empty = {
            "think": self.think is None,
            "think_end": self.think_end is None,
            "stop": not self.stop,
            "tool_call": not self.tool_call,
        }
        return tuple(name for name, is_empty in empty.items() if is_empty)

    def as_dict(self) -> dict[str, int | list[int] | None]:
        """A JSON-ready view, for shard metadata and manifests."""
        return {
            "think": self.think,
            "think_end": self.think_end,
            "stop": list(self.stop),
            "tool_call": sorted(self.tool_call),
        }


def normalize_overrides(overrides: Mapping[str, int] | None) -> dict[str, int]:
    """Map override keys to token names, checking each key and id; raises ConfigError."""
    by_token: dict[str, int] = {}
    for key, value in (overrides or {}).items():
        token = OVERRIDE_KEYS.get(key, key if key in OVERRIDE_KEYS.values() else None)
        if token is None:
            known = ", ".join(OVERRIDE_KEYS)
            raise ConfigError(
                f"unknown boundary override {key!r}; use one of: {known} (or the token text)"
            )
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(
                f"boundary override {key!r} must be a non-negative token id, got {value!r}; "
                "fix it in the config's boundary settings"
            )
        by_token[token] = value
    return by_token


def resolve_boundaries(
    lookup: TokenLookup,
    eos_id: int | None,
    overrides: Mapping[str, int] | None = None,
) -> BoundaryIds:
    """Resolve every boundary by token name through ``lookup``, overrides first."""
    fixed = normalize_overrides(overrides)
    unresolved: list[str] = []

    def find(token: str) -> int | None:
        tid = fixed[token] if token in fixed else lookup(token)
        if tid is None:
            unresolved.append(token)
        return tid

    think = find(kimi.THINK_TOKEN)
    think_end = find(kimi.THINK_END_TOKEN)
    turn_end = find(kimi.STOP_TOKEN)
    tool_ids = [find(name) for name in kimi.TOOL_CALL_TOKENS]
    stop = tuple(dict.fromkeys(t for t in (turn_end, eos_id) if t is not None))
    return BoundaryIds(
        think=think,
        think_end=think_end,
        stop=stop,
        tool_call=frozenset(t for t in tool_ids if t is not None),
        unresolved=tuple(unresolved),
    )

"""A radix-cache stand-in that makes ``meta_info.cached_tokens`` plausible.

SGLang caches the KV of every prompt (and, when a request finishes, of prompt +
output), so a later prompt sharing a prefix reports that prefix as cached, minus
the last token, which is always recomputed. Here a set holds the rolling hash of
every cached prefix; when it outgrows its budget it is dropped whole (a crude
eviction, enough for a simulation).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

_MULTIPLIER: Final = 0x100000001B3
_MASK: Final = (1 << 64) - 1


class PrefixCache:
    """Longest cached prefix of a token sequence."""

    def __init__(self, max_entries: int = 500_000) -> None:
        self._prefixes: set[int] = set()
        self._max_entries = max_entries

    def cached_tokens(self, prompt: Sequence[int]) -> int:
        """How many prompt tokens SGLang would report as cached (at most len - 1)."""
        return min(self._longest_prefix(prompt), max(len(prompt) - 1, 0))

    def insert(self, tokens: Sequence[int]) -> None:
        """Remember every prefix of ``tokens``."""
        if len(self._prefixes) + len(tokens) > self._max_entries:
            self._prefixes.clear()
        value = 0
        add = self._prefixes.add
        for token in tokens:
            value = (value * _MULTIPLIER + token + 1) & _MASK
            add(value)

    def clear(self) -> None:
        """Forget everything (``/flush_cache``)."""
        self._prefixes.clear()

    def _longest_prefix(self, tokens: Sequence[int]) -> int:
        value = 0
        prefixes = self._prefixes
        for length, token in enumerate(tokens):
            value = (value * _MULTIPLIER + token + 1) & _MASK
            if value not in prefixes:
                return length
        return len(tokens)

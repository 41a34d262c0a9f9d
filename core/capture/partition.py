"""``capture --shard I/N``: one slice of a prompt set, so N batches on N nodes split one job.

A prompt belongs to slice ``int(sha256(sample_id)[:8]) % N``: the same on every machine, for
any file order, and all sampling presets of a prompt land in the same slice (the base id
decides). A rejected record goes with its sample id when it has one, else with its line
number, so every reject is logged by exactly one slice. The N batch directories share one
batch config (prompt file hash, tokenizer, sampling); their manifests name their slice, and
``stats``/``inspect``/``export`` check that directories given together are disjoint slices of
one job (``core.samples.job``). The prompt source of one slice is in
``core.capture.partsource`` (this module stays free of the prompt readers and pyarrow, so
batch bookkeeping can parse ``I/N``).
"""

from __future__ import annotations

import hashlib
import re
from typing import Protocol

from eagle_tui.core.errors import ConfigError
from eagle_tui.core.wire import TextValue

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


class Placed(Protocol):
    """A prompt record or a reject: where it is and (maybe) its sample id."""

    @property
    def sample_id(self) -> str | None: ...

    @property
    def line(self) -> int: ...


class Partition(TextValue):
    """Slice ``index`` (0-based) of ``count``, immutable. JSON holds it as its text,
    ``"I/N"`` (not a dataclass: msgspec would write those as objects)."""

    __slots__ = ("count", "index")
    index: int
    count: int

    def __init__(self, index: int, count: int) -> None:
        if count < 1 or not 0 <= index < count:
            raise ConfigError(f"--shard {index}/{count}: want I/N with 0 <= I < N "
                              "(e.g. 0/4 1/4 2/4 3/4 on four nodes)")
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "count", count)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Partition does not change ({name})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Partition) and (self.index, self.count) == (other.index,
                                                                              other.count)

    def __hash__(self) -> int:
        return hash((self.index, self.count))

    def __repr__(self) -> str:
        return f"Partition(index={self.index}, count={self.count})"

    @classmethod
    def parse(cls, text: str) -> Partition:
        """``"I/N"`` -> Partition (ConfigError when it is not one)."""
        match = _SPEC.match(text)
        if match is None:
            raise ConfigError(f"--shard {text!r}: want I/N, e.g. 0/4")
        return cls(int(match[1]), int(match[2]))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, sample_id: str) -> bool:
        """True when the prompt with this (base) sample id is in this slice."""
        digest = hashlib.sha256(sample_id.encode("utf-8")).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index

    def owns_item(self, item: Placed) -> bool:
        """True for records and rejects of this slice (an id-less reject goes by its line)."""
        if item.sample_id:
            return self.owns(item.sample_id)
        return (item.line - 1) % self.count == self.index

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
from dataclasses import dataclass
from typing import Protocol

from eagle_tui.core.errors import ConfigError
from eagle_tui.core.sample_ids import MAX_SLICES, parse_slice


class Placed(Protocol):
    """A prompt record or a reject: where it is and (maybe) its sample id."""

    @property
    def sample_id(self) -> str | None: ...

    @property
    def line(self) -> int: ...


@dataclass(frozen=True)
class Partition:
    """Slice ``index`` (0-based) of ``count``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MAX_SLICES or not 0 <= self.index < self.count:
            raise ConfigError(f"--shard {self.index}/{self.count}: want I/N with 0 <= I < N "
                              f"<= {MAX_SLICES} (e.g. 0/4 1/4 2/4 3/4 on four nodes)")

    @classmethod
    def parse(cls, text: str) -> Partition:
        """``"I/N"`` -> Partition (ConfigError when it is not one)."""
        try:
            return cls(*parse_slice(text))
        except ValueError as e:
            raise ConfigError(f"--shard {e}") from None

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

"""Several batch directories read as one (the ``--shard I/N`` slices of a job): row indices run
through the batches in the order given. Only what ``inspect`` needs; the directories are
checked to belong together elsewhere (``core.export.sources.open_batches``)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from pathlib import Path

from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.shards.reader import ShardFile, ShardReader
from eagle_tui.core.shards.schema import ShardMetadata, ShardRow


class ReaderChain:
    """``readers`` one after another."""

    def __init__(self, readers: Sequence[ShardReader]) -> None:
        if not readers:
            raise ValueError("a reader chain needs at least one reader")
        self.readers = tuple(readers)
        self.path: Path = readers[0].path
        self.manifest: Manifest | None = readers[0].manifest
        self._starts: list[int] = []
        total = 0
        for reader in self.readers:
            self._starts.append(total)
            total += reader.num_rows
        self.num_rows = total

    @property
    def metadata(self) -> ShardMetadata | None:
        """The first batch's provenance (the batches share tokenizer and config)."""
        return next((r.metadata for r in self.readers if r.metadata is not None), None)

    def row(self, index: int) -> ShardRow:
        """The row at global ``index``."""
        reader, local = self._locate(index)
        return reader.row(local)

    def shard_of(self, index: int) -> tuple[ShardFile, int]:
        """The shard holding global ``index`` and the row's position in it."""
        reader, local = self._locate(index)
        return reader.shard_of(local)

    def index_of(self, sample_id: str) -> int | None:
        """Global index of ``sample_id``, None when no batch has it."""
        for start, reader in zip(self._starts, self.readers, strict=True):
            local = reader.index_of(sample_id)
            if local is not None:
                return start + local
        return None

    def index_with_flag(self, flag: str, start: int = 0) -> int | None:
        """Global index of the first row at or after ``start`` with ``flag``."""
        for first, reader in zip(self._starts, self.readers, strict=True):
            if first + reader.num_rows <= start:
                continue
            local = reader.index_with_flag(flag, max(0, start - first))
            if local is not None:
                return first + local
        return None

    def _locate(self, index: int) -> tuple[ShardReader, int]:
        if index < 0:
            index += self.num_rows
        if not 0 <= index < self.num_rows:
            raise IndexError(f"row {index} out of range (0..{self.num_rows - 1})")
        position = bisect.bisect_right(self._starts, index) - 1  # never an empty batch
        return self.readers[position], index - self._starts[position]

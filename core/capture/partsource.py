"""The prompt source of one ``--shard I/N`` slice (``core.capture.partition``)."""

from __future__ import annotations

from collections.abc import Iterator

from eagle_tui.core.capture.partition import Partition
from eagle_tui.core.capture.prompts import PromptRecord, PromptSource, Reject


class PartitionedSource(PromptSource):
    """The records and rejects of one slice of ``source`` (same file, same hash)."""

    def __init__(self, source: PromptSource, partition: Partition) -> None:
        super().__init__(source.path, source.format)
        self.partition = partition

    def __iter__(self) -> Iterator[PromptRecord | Reject]:
        for item in super().__iter__():
            if self.partition.owns_item(item):
                yield item

    def count(self) -> int:
        """Records in this slice (reads the whole file: run it off the event loop)."""
        return sum(1 for _ in self)

"""Conversations in multi-turn batches (shard schema 2): whether shards have them, and
turns-per-conversation statistics. Single-turn shards (schema 1) have no conversations.
A conversation's rows in turn order are selected in ``core.samples.select``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from eagle_tui.core.shards.reader import ShardReader
from eagle_tui.core.shards.schema import MULTI_TURN_SCHEMA_VERSION

DIVERGED_FLAG = "tool_call_diverged"


def is_multi_turn(reader: ShardReader) -> bool:
    """True when the shards carry the conversation columns (schema 2)."""
    metadata = reader.metadata
    return metadata is not None and metadata.schema_version >= MULTI_TURN_SCHEMA_VERSION


@dataclass(frozen=True, slots=True)
class ConversationStats:
    """How many conversations, how many stored turns each, and how many diverged."""

    conversations: int
    turns: dict[str, int]  # stored turns per conversation -> conversations with that many
    mean_turns: float | None
    diverged: int


class ConversationCounter:
    """Feed it row groups (with ``conversation_id`` and ``flags``), then :meth:`result`."""

    def __init__(self) -> None:
        self._rows: Counter[str] = Counter()
        self._diverged = 0

    def add(self, table: pa.Table) -> None:
        """Fold one row group in."""
        ids = table.column("conversation_id").combine_chunks()
        self._rows.update(str(v) for v in ids.to_pylist())
        flags = pc.list_flatten(table.column("flags").combine_chunks())
        self._diverged += int(pc.sum(pc.equal(flags, DIVERGED_FLAG)).as_py() or 0)

    def result(self) -> ConversationStats:
        """The statistics of everything added."""
        histogram = Counter(self._rows.values())
        count = len(self._rows)
        mean = sum(self._rows.values()) / count if count else None
        return ConversationStats(count, {str(k): histogram[k] for k in sorted(histogram)},
                                 mean, self._diverged)

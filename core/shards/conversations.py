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
from eagle_tui.core.validate import (
    DIVERGED_FLAG,
    ENDED_FLAG,
    ENDINGS_SHOWN,
    ending_reason,
    ending_text,
)


def is_multi_turn(reader: ShardReader) -> bool:
    """True when the shards carry the conversation columns (schema 2)."""
    metadata = reader.metadata
    return metadata is not None and metadata.schema_version >= MULTI_TURN_SCHEMA_VERSION


@dataclass(frozen=True, slots=True)
class ConversationStats:
    """How many conversations, how many stored turns each, how many diverged, and which
    ended before their last turn (``ended``: the first :data:`ENDINGS_SHOWN` in order)."""

    conversations: int
    turns: dict[str, int]  # stored turns per conversation -> conversations with that many
    mean_turns: float | None
    diverged: int
    ended_early: int = 0
    ended: tuple[str, ...] = ()


class ConversationCounter:
    """Feed it row groups (with ``conversation_id`` and ``flags``), then :meth:`result`."""

    def __init__(self) -> None:
        self._rows: Counter[str] = Counter()
        self._diverged = 0
        self._ended = 0
        self._endings: list[str] = []

    def add(self, table: pa.Table) -> None:
        """Fold one row group in (``turn`` and ``finish_reason`` name the endings)."""
        ids = table.column("conversation_id").combine_chunks()
        self._rows.update(str(v) for v in ids.to_pylist())
        lists = table.column("flags").combine_chunks()
        flags = pc.list_flatten(lists)
        self._diverged += int(pc.sum(pc.equal(flags, DIVERGED_FLAG)).as_py() or 0)
        ended = pc.filter(pc.list_parent_indices(lists), pc.equal(flags, ENDED_FLAG))
        self._ended += len(ended)
        for row in ended.to_pylist()[: max(0, ENDINGS_SHOWN - len(self._endings))]:
            self._endings.append(_ending(table, row))

    def result(self) -> ConversationStats:
        """The statistics of everything added."""
        histogram = Counter(self._rows.values())
        count = len(self._rows)
        mean = sum(self._rows.values()) / count if count else None
        return ConversationStats(count, {str(k): histogram[k] for k in sorted(histogram)},
                                 mean, self._diverged, self._ended, tuple(self._endings))


def _ending(table: pa.Table, row: int) -> str:
    """The ending text of row ``row`` (flagged ``conversation_ended``) of ``table``."""
    def value(name: str) -> object:
        return table.column(name)[row].as_py() if name in table.column_names else None

    flags = value("flags")
    finish = value("finish_reason")
    turn = value("turn")
    return ending_text(str(value("conversation_id")), turn if isinstance(turn, int) else -1,
                       ending_reason(flags if isinstance(flags, list) else [],
                                     finish if isinstance(finish, str) else None))

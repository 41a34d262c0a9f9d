"""Which rows: the one definition of row selection that ``inspect`` and the Inspect view use.

A :class:`SampleFilter` keeps rows by flag (``any``, ``clean``, ``flagged`` or one flag's
name) and finish reason, and can narrow them to one conversation's turns (multi-turn
batches), listed in turn order. ``inspect --flag F`` is the first row of
``SampleFilter(flag=F)``, ``inspect --conversation ID`` the rows of
``SampleFilter(conversation=ID)``: the view's table with the same filter lists the same rows.

Only the small ``flags`` and ``finish_reason`` columns (and ``conversation_id`` / ``turn``
for a conversation) are read, one row group at a time, and matched with Arrow compute.
Which rows an *export* keeps is :class:`eagle_tui.core.export.tally.KeepTally`'s decision;
``stats`` and the view show its count from the same code.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from eagle_tui.core.errors import InspectError
from eagle_tui.core.samples.job import Job
from eagle_tui.core.shards.conversations import is_multi_turn
from eagle_tui.core.validate import FLAGS

ANY = "any"
CLEAN = "clean"
FLAGGED = "flagged"
SELECT_COLUMNS = ("flags", "finish_reason")


@dataclass(frozen=True)
class SampleFilter:
    """Which rows to list: ``flag`` is any / clean / flagged / a flag name; ``finish`` is
    any or a finish reason; ``conversation`` (multi-turn batches) lists that conversation's
    turns only, in turn order."""

    flag: str = ANY
    finish: str = ANY
    conversation: str | None = None

    @property
    def is_all(self) -> bool:
        """True when nothing is filtered out."""
        return self.flag == ANY and self.finish == ANY and self.conversation is None

    @property
    def reads_rows(self) -> bool:
        """True when the flag or finish reason decides (their columns must be read)."""
        return self.flag != ANY or self.finish != ANY


def row_mask(table: pa.Table, wanted: SampleFilter) -> pa.Array:
    """Boolean mask of the rows of ``table`` (with ``flags`` and ``finish_reason``) that
    ``wanted``'s flag and finish reason keep."""
    rows = table.num_rows
    mask = pa.array([True] * rows)
    if wanted.finish != ANY:
        mask = pc.and_(mask, pc.fill_null(pc.equal(table["finish_reason"], wanted.finish), False))
    flags = table["flags"].combine_chunks()
    if wanted.flag == CLEAN:
        mask = pc.and_(mask, pc.equal(pc.list_value_length(flags), 0))
    elif wanted.flag == FLAGGED:
        mask = pc.and_(mask, pc.greater(pc.list_value_length(flags), 0))
    elif wanted.flag != ANY:
        parents = pc.list_parent_indices(flags)
        hit_rows = pc.filter(parents, pc.equal(pc.list_flatten(flags), wanted.flag))
        mask = pc.and_(mask, pc.is_in(pa.array(range(rows), pa.int64()), value_set=hit_rows))
    return pc.fill_null(mask, False)


def matching_rows(job: Job, wanted: SampleFilter) -> pa.Array:
    """Global indices (int64) of the rows ``wanted`` keeps, in row order, or in turn order
    for a conversation (its few indices are matched in Arrow, never a set of every row)."""
    if wanted.conversation is not None:
        turns = pa.array(conversation_rows(job, wanted.conversation), pa.int64())
        if not wanted.reads_rows:
            return turns
        return pc.filter(turns, pc.is_in(turns, value_set=_kept(job, wanted)))
    if wanted.is_all:
        return pa.array(range(job.num_rows), pa.int64())
    return _kept(job, wanted)


def first_matching(job: Job, wanted: SampleFilter) -> int | None:
    """Global index of the first row ``wanted`` keeps (reading no further than it)."""
    if wanted.conversation is not None:
        found = matching_rows(job, wanted)
        return int(found[0].as_py()) if len(found) else None
    for offset, table in _row_groups(job):
        hits = pc.indices_nonzero(row_mask(table, wanted))
        if len(hits):
            return offset + int(hits[0].as_py())
    return None


def conversation_rows(job: Job, conversation_id: str) -> list[int]:
    """Global indices of ``conversation_id``'s rows, in turn order (empty when none, and
    always for single-turn batches, which have no conversations)."""
    found: list[tuple[int, int]] = []
    for start, reader in job.parts():
        if not is_multi_turn(reader):
            continue
        offset = start
        for table in reader.iter_batches(["conversation_id", "turn"]):
            hits = pc.indices_nonzero(pc.equal(table.column("conversation_id"), conversation_id))
            turns = table.column("turn").combine_chunks()
            found += [(int(turns[int(i)].as_py()), offset + int(i)) for i in hits.to_pylist()]
            offset += table.num_rows
    return [index for _turn, index in sorted(found)]


@dataclass(frozen=True)
class Pick:
    """What ``inspect`` was asked to show: one sample by id, by flag or by index (the first
    row when none is given), or every turn of a conversation."""

    sample_id: str | None = None
    flag: str | None = None
    index: int | None = None
    conversation: str | None = None


def pick_rows(job: Job, pick: Pick, where: str) -> list[int]:
    """The global indices ``pick`` names (``where`` names the job in messages);
    InspectError (status 1) when nothing matches, (status 2) for an index out of range."""
    if pick.conversation is not None:
        indices = matching_rows(job, SampleFilter(conversation=pick.conversation)).to_pylist()
        if not indices:
            what = "" if job.multi_turn else " (its shards are single-turn)"
            raise InspectError(f"no conversation {pick.conversation!r} in {where}{what}", 1)
        return [int(i) for i in indices]
    if job.num_rows == 0:
        unread = job.ignored
        if unread:  # e.g. another user's 0600 shards: say why rather than "nothing there"
            raise InspectError(f"no shard in {where} could be read ({unread[0]}"
                               f"{f' and {len(unread) - 1} more' if len(unread) > 1 else ''})"
                               "; nothing to inspect", 2)
        raise InspectError(f"no complete shards in {where}; nothing to inspect", 1)
    return [_one_row(job, pick, where)]


def _one_row(job: Job, pick: Pick, where: str) -> int:
    if pick.sample_id is not None:
        index = job.index_of(pick.sample_id)
        if index is None:
            raise InspectError(f"no sample with id {pick.sample_id!r} in {where}", 1)
        return index
    if pick.flag is not None:
        found = first_matching(job, SampleFilter(flag=pick.flag))
        if found is None:
            known = "" if pick.flag in FLAGS else f" (known flags: {', '.join(FLAGS)})"
            raise InspectError(f"no sample has flag {pick.flag!r} in {where}{known}", 1)
        return found
    index = pick.index if pick.index is not None else 0
    if not -job.num_rows <= index < job.num_rows:
        raise InspectError(f"--index {index} is out of range: {where} holds {job.num_rows} "
                           f"rows (0..{job.num_rows - 1})")
    return index % job.num_rows


def _kept(job: Job, wanted: SampleFilter) -> pa.Array:
    """Global indices of the rows the flag and finish filters keep."""
    parts = [pc.add(pc.cast(pc.indices_nonzero(row_mask(table, wanted)), pa.int64()), offset)
             for offset, table in _row_groups(job)]
    return pa.chunked_array(parts, type=pa.int64()).combine_chunks()


def _row_groups(job: Job) -> Iterator[tuple[int, pa.Table]]:
    """``(global index of its first row, table of SELECT_COLUMNS)`` per row group."""
    for start, reader in job.parts():
        offset = start
        for table in reader.iter_batches(list(SELECT_COLUMNS)):
            yield offset, table
            offset += table.num_rows

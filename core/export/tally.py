"""Which rows an export keeps, decided and counted one row group at a time.

The same :class:`KeepTally` decides rows for :func:`eagle_tui.core.export.run.export` and
counts them for ``eagle-tui stats`` and the Inspect view, so what they show is what an
export with the same options would write.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eagle_tui.core.accept.heldout import HeldOutSplit
from eagle_tui.core.export.options import MaskStart, RowFilter, mask_offset
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.text import counts_text

FILTER_COLUMNS = ("flags", "finish_reason", "sample_id")
HELD_OUT = "held_out"
"""The drop reason of a row of the batch's held-out split (export --include-held-out keeps it)."""
LENGTH_COLUMNS = ("prompt_len", "input_ids")
INVALID_REASONS = ("empty_ids", "id_out_of_range", "bad_prompt_len")
"""Rows no trainer can use, dropped whatever the flags say: capture never writes them, but a
shard edited by hand or written by another tool can hold them (its flags say nothing)."""


class LengthReport(msgspec.Struct, frozen=True):
    """At a trainer's max length ``limit``, among kept rows: ``cut`` are longer and lose
    their tail; ``dropped`` have no trained position left (the mask starts at or past
    ``limit``), which both trainers skip without saying which rows."""

    limit: int
    cut: int
    dropped: int

    def text(self) -> str:
        """``at max length 4096: 12 rows cut, 1 dropped by the trainer``."""
        return f"at max length {self.limit}: {self.cut} rows cut, {self.dropped} dropped by " \
            "the trainer"


class KeepCounts(msgspec.Struct, frozen=True):
    """Rows seen, kept, dropped per reason (largest first), and the length report (written
    as ``max_length`` in ``stats --json`` and the export manifest)."""

    rows: int
    kept: int
    dropped: dict[str, int]
    length: LengthReport | None = msgspec.field(default=None, name="max_length")

    def text(self, lead: str = "export would keep") -> str:
        """``export would keep 97 of 100 (dropped: aborted 2, count_mismatch 1)``."""
        dropped = counts_text(self.dropped) if self.dropped else "none"
        line = f"{lead} {self.kept:,} of {self.rows:,} (dropped: {dropped})"
        return line if self.length is None else f"{line}; {self.length.text()}"


@dataclass
class KeepTally:
    """Running decisions over row groups; see :meth:`decide` and :meth:`counts`."""

    filter: RowFilter
    mask_start: MaskStart = "prompt"
    max_length: int | None = None
    vocab_size: int | None = None
    rows: int = 0
    kept: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    cut: int = 0
    too_long: int = 0
    held_out: HeldOutSplit | None = None  # the current batch's split, when it is left out

    @property
    def columns(self) -> list[str]:
        """The shard columns :meth:`decide` needs (the ids and prompt length are checked)."""
        return [*FILTER_COLUMNS, *LENGTH_COLUMNS]

    def add(self, table: pa.Table) -> None:
        """Count one row group (the decisions themselves are not needed)."""
        self.decide(table)

    def decide(self, table: pa.Table) -> pa.Array:
        """Keep (True) or drop each row of ``table``, counting both; ``table`` holds at
        least :attr:`columns`."""
        flags = table.column("flags").to_pylist()
        finishes = table.column("finish_reason").to_pylist()
        invalid = invalid_reasons(table, self.vocab_size)
        reasons = [bad or self.filter.reason(f or (), r)
                   for bad, f, r in zip(invalid, flags, finishes, strict=True)]
        if self.held_out is not None:
            split = self.held_out
            ids = table.column("sample_id").to_pylist()
            reasons = [HELD_OUT if reason is None and split.holds(i) else reason
                       for reason, i in zip(reasons, ids, strict=True)]
        keep = [reason is None for reason in reasons]
        self.rows += len(keep)
        self.kept += sum(keep)
        self.dropped.update(reason for reason in reasons if reason is not None)
        if self.max_length is not None:
            self._count_lengths(table, keep, self.max_length)
        return _booleans(keep)

    def _count_lengths(self, table: pa.Table, keep: list[bool], limit: int) -> None:
        lengths = pc.list_value_length(table.column("input_ids")).to_pylist()
        offset = mask_offset(self.mask_start)
        prompts = table.column("prompt_len").to_pylist()
        for kept, length, prompt in zip(keep, lengths, prompts, strict=True):
            if not kept or length <= limit:
                continue
            if max(prompt - offset, 0) >= limit:
                self.too_long += 1
            else:
                self.cut += 1

    def counts(self) -> KeepCounts:
        """The tallies so far; dropped reasons largest first, ties by name."""
        ordered = dict(sorted(self.dropped.items(), key=lambda kv: (-kv[1], kv[0])))
        length = None
        if self.max_length is not None:
            length = LengthReport(self.max_length, self.cut, self.too_long)
        return KeepCounts(self.rows, self.kept, ordered, length)


def _booleans(values: list[bool]) -> pa.BooleanArray:
    """``values`` as Arrow booleans (``pa.array`` would import pandas)."""
    bits = np.packbits(np.array(values, dtype=np.bool_), bitorder="little")
    array: pa.BooleanArray = pa.Array.from_buffers(pa.bool_(), len(values),
                                                   [None, pa.py_buffer(bits)])
    return array


def invalid_reasons(table: pa.Table, vocab_size: int | None) -> list[str | None]:
    """Per row, why its ids cannot be trained on (:data:`INVALID_REASONS`) or None; checked
    in Arrow. A table without ``input_ids`` (a light preview) is not checked."""
    reasons: list[str | None] = [None] * table.num_rows
    if "input_ids" not in table.column_names or "prompt_len" not in table.column_names:
        return reasons
    ids = _one_array(table.column("input_ids"))
    lengths = pc.fill_null(pc.list_value_length(ids), 0)
    prompts = pc.fill_null(table.column("prompt_len").combine_chunks(), -1)
    checks = (
        ("bad_prompt_len", pc.indices_nonzero(
            pc.or_(pc.less(prompts, 0), pc.greater(prompts, lengths)))),
        ("id_out_of_range", _rows_out_of_range(ids, vocab_size)),
        ("empty_ids", pc.indices_nonzero(pc.equal(lengths, 0))),
    )
    for reason, rows in checks:  # the last that applies wins: the plainest reason
        for row in rows.to_pylist():
            reasons[row] = reason
    return reasons


def _one_array(column: pa.ChunkedArray) -> pa.Array:
    """The column as one array; a row group's single chunk as it is (combining copies it)."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _rows_out_of_range(ids: pa.ListArray, vocab_size: int | None) -> pa.Array:
    """Rows holding an id below 0, at or above ``vocab_size``, or missing (null). One
    min/max pass settles the usual row group, where every id is in range."""
    flat = pc.list_flatten(ids)
    low, high = (scalar.as_py() for scalar in pc.min_max(flat).values())
    if not flat.null_count and (low is None or (
            low >= 0 and (vocab_size is None or high < vocab_size))):
        return pa.nulls(0, pa.int64())
    outside = pc.less(flat, 0)
    if vocab_size is not None:
        outside = pc.or_(outside, pc.greater_equal(flat, vocab_size))
    return pc.filter(pc.list_parent_indices(ids), pc.fill_null(outside, True))


def batch_split(manifest: Manifest) -> HeldOutSplit | None:
    """The held-out split a batch declared at capture, if any."""
    fraction = manifest.config.extra.held_out
    if not isinstance(fraction, float) or not fraction:
        return None
    return HeldOutSplit(fraction, tuple(p.name for p in manifest.config.sampling.presets))

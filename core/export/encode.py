"""Kept rows of one row group -> the bytes of each format, ids untouched, whole columns at once.

Token ids never pass through a tokenizer or a float: every id's text is Arrow's int32 ->
decimal string cast followed by ``", "``, computed for the whole column in one call (looked
up in a table of those texts, itself made by that cast, when the ids are small enough), so
the JSON holds exactly the stored integers (tests compare every exported row to its shard
row id for id). A row's ids are then one slice of that column-wide buffer, and its mask two
slices of constant ``"0, 0, …"`` / ``"1, 1, …"`` buffers: no Python object per id. Masks are
built from ``prompt_len`` alone.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from eagle_tui.core.export.options import ExportFormat, MaskStart, mask_offset
from eagle_tui.core.shards.schema import TURN_COLUMNS

JSONL_COLUMNS = ("sample_id", "input_ids", "prompt_len", "finish_reason", "matched_stop",
                 "think_end", "flags", "endpoint", "rid")
MASK_TYPE = pa.list_(pa.field("element", pa.int8()))
ID_TABLE_LIMIT = 1 << 20
"""Ids below this are looked up in a table of their texts (at most ~8 MiB, built once per
size); larger or negative ids are cast directly (same text, slower)."""
SEPARATOR = b", "
ROWS_PER_CHUNK = 64
"""Rows per chunk handed to the writer thread (a few MiB: memory stays flat)."""
SMALL_OFFSETS_IDS = 1 << 27
"""Up to this many ids in a row group, their texts (9 bytes each at most from the table) fit
32-bit offsets."""

Index = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class RowBounds:
    """Each row's token count and where its mask turns to 1 (clamped to the row)."""

    offsets: pa.Array  # list offsets starting at 0: row r's ids are [offsets[r], offsets[r+1])
    lengths: Index
    starts: Index

    @classmethod
    def of(cls, table: pa.Table, mask_start: MaskStart) -> RowBounds:
        offsets, _ = _flat(table.column("input_ids"))
        lengths = np.diff(offsets.to_numpy()).astype(np.int64)
        prompts = table.column("prompt_len").to_numpy().astype(np.int64)
        starts = np.clip(prompts - mask_offset(mask_start), 0, lengths)
        return cls(offsets, lengths, starts)


@dataclass(frozen=True, slots=True)
class IdTexts:
    """Every row's ids as JSON integers (``1, 2, 3``): row r is ``data[starts[r]:ends[r]]``."""

    data: memoryview
    starts: list[int]
    ends: list[int]

    def row(self, r: int) -> memoryview:
        """Row ``r``'s ids, without brackets."""
        return self.data[self.starts[r]:self.ends[r]]


class SplitIdTexts:
    """:class:`IdTexts` of a row group encoded in two halves at once: rows before ``split``
    are in the first, the rest in the second."""

    def __init__(self, first: IdTexts, second: IdTexts, split: int) -> None:
        self._first, self._second, self._split = first, second, split

    def row(self, r: int) -> memoryview:
        """Row ``r``'s ids, without brackets."""
        return self._first.row(r) if r < self._split else self._second.row(r - self._split)


def id_texts_on(ids: pa.ChunkedArray, helper: Executor | None) -> IdTexts | SplitIdTexts:
    """:func:`id_texts`, the second half of the rows encoded by ``helper`` while this thread
    encodes the first (Arrow's ``take`` releases the GIL: two cores, half the wait). An
    error in the helper is raised here, as the same exception."""
    split = len(ids) // 2
    if helper is None or split == 0:
        return id_texts(ids)
    second = helper.submit(id_texts, ids.slice(split))
    try:
        first = id_texts(ids.slice(0, split))
    finally:
        halves = second.result()  # waited for even when this half failed: no thread left behind
    return SplitIdTexts(first, halves, split)


def id_texts(ids: pa.ChunkedArray | pa.ListArray) -> IdTexts:
    """The ids of every row as text, encoded as one column (see the module docstring)."""
    offsets, values = _flat(ids)
    texts = _texts_with_separator(values)
    ends = _byte_offsets(texts)
    rows = offsets.to_numpy()
    starts = ends[rows[:-1]].astype(np.int64)
    stops = np.maximum(ends[rows[1:]] - len(SEPARATOR), starts)  # the last ", " dropped
    data = memoryview(texts.buffers()[2] or b"")
    return IdTexts(data, starts.tolist(), stops.tolist())


def _byte_offsets(texts: pa.StringArray | pa.LargeStringArray) -> npt.NDArray[np.integer[Any]]:
    """Where each text starts in the data buffer, then where the last one ends."""
    width = np.int64 if pa.types.is_large_string(texts.type) else np.int32
    every: npt.NDArray[np.integer[Any]] = np.frombuffer(texts.buffers()[1], width)
    return every[texts.offset:texts.offset + len(texts) + 1]


def _texts_with_separator(values: pa.Array) -> pa.StringArray | pa.LargeStringArray:
    """``"<id>, "`` per id (values non-null: nulls are dropped as invalid before)."""
    if not len(values):
        return _decimal_with_separator(values, pa.string())
    low, high = (scalar.as_py() for scalar in pc.min_max(values).values())
    if low is None or low < 0 or high >= ID_TABLE_LIMIT:
        return _decimal_with_separator(values, pa.large_string())
    size = 1 << max(int(high).bit_length(), 10)
    # 32-bit offsets take faster; they hold up to 2 GiB of text, 9 bytes per id at most here
    large = len(values) >= SMALL_OFFSETS_IDS
    return _id_table(size, large=large).take(values)


@functools.lru_cache(maxsize=4)
def _id_table(size: int, *, large: bool) -> pa.StringArray | pa.LargeStringArray:
    """``"0, "``, ``"1, "``, … ``"size-1, "``: the texts the direct cast would give."""
    kind = pa.large_string() if large else pa.string()
    return _decimal_with_separator(numpy_array(np.arange(size, dtype=np.int32)), kind)


def _decimal_with_separator(values: pa.Array,
                            kind: pa.DataType) -> pa.StringArray | pa.LargeStringArray:
    decimal = pc.cast(values, kind)
    separator, nothing = (pa.scalar(text, kind) for text in (SEPARATOR.decode(), ""))
    texts: pa.StringArray | pa.LargeStringArray = pc.binary_join_element_wise(
        decimal, separator, nothing)
    return texts


def numpy_array(values: npt.NDArray[Any]) -> pa.Array:
    """A numeric Arrow array over ``values``' memory (``pa.array`` would import pandas, a
    noticeable part of a short export)."""
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values),
                                 [None, pa.py_buffer(values)])


def _flat(ids: pa.ChunkedArray | pa.ListArray) -> tuple[pa.Array, pa.Array]:
    """Offsets starting at 0 and the values they index, for a list column that may be
    chunked or a slice (``.values`` would ignore a slice; ``flatten`` does not)."""
    lists = ids
    if isinstance(ids, pa.ChunkedArray):  # one chunk (a row group) is used as it is, not copied
        lists = ids.chunk(0) if ids.num_chunks == 1 else ids.combine_chunks()
    offsets = lists.offsets
    first = offsets[0].as_py() if len(offsets) else 0
    if first:
        offsets = pc.subtract(offsets, pa.scalar(first, pa.int32()))
    return offsets, lists.flatten()


class MaskTexts:
    """Loss masks as text (``0, 0, 1, 1``), cut from two constant buffers."""

    def __init__(self, bounds: RowBounds) -> None:
        longest = int(bounds.lengths.max()) if len(bounds.lengths) else 0
        self._zeros = memoryview(b"0, " * longest)
        self._ones = memoryview(b"1, " * longest)
        self._lengths = bounds.lengths.tolist()
        self._starts = bounds.starts.tolist()

    def row(self, r: int) -> tuple[memoryview, memoryview]:
        """Row ``r``'s mask as two pieces (zeros, then ones), the last ``", "`` dropped."""
        length, start = self._lengths[r], self._starts[r]
        if start == length:
            return self._zeros[:max(3 * length - 2, 0)], self._ones[:0]
        return self._zeros[:3 * start], self._ones[:3 * (length - start) - 2]


def jsonl_chunks(table: pa.Table, kept: list[int], fmt: ExportFormat, mask_start: MaskStart,
                 fingerprint: str, helper: Executor | None = None) -> Iterator[bytes]:
    """The JSONL bytes of ``table``'s rows numbered in ``kept`` (each line ends with a
    newline), :data:`ROWS_PER_CHUNK` rows at a time; the other rows' ids are encoded too,
    which costs less than copying the table without them. ``helper`` (a thread) encodes
    half the ids.

    speculators: ``{"id", "input_ids", "loss_mask", "metadata"}`` (the row shape its own
    regeneration writes); specforge: ``{"input_ids", "loss_mask"}`` (``data.prompts_path``).
    """
    ids = id_texts_on(table.column("input_ids"), helper)
    masks = MaskTexts(RowBounds.of(table, mask_start))
    rows = [] if fmt == "specforge" else table.drop_columns(["input_ids"]).take(kept).to_pylist()
    for at in range(0, len(kept), ROWS_PER_CHUNK):
        part = kept[at:at + ROWS_PER_CHUNK]
        if fmt == "specforge":
            yield b"".join(_specforge_pieces(ids, masks, part))
        else:
            numbered = zip(part, rows[at:at + ROWS_PER_CHUNK], strict=True)
            yield b"".join(_speculators_pieces(ids, masks, numbered, fingerprint))


def _specforge_pieces(ids: IdTexts | SplitIdTexts, masks: MaskTexts,
                      kept: list[int]) -> Iterator[bytes | memoryview]:
    for r in kept:
        yield b'{"input_ids": ['
        yield ids.row(r)
        yield b'], "loss_mask": ['
        yield from masks.row(r)
        yield b"]}\n"


_META_JSON = json.JSONEncoder(sort_keys=True)  # what json.dumps(m, sort_keys=True) uses
_ID_JSON = json.JSONEncoder()


def _speculators_pieces(ids: IdTexts | SplitIdTexts, masks: MaskTexts,
                        rows: Iterable[tuple[int, dict[str, Any]]],
                        fingerprint: str) -> Iterator[bytes | memoryview]:
    for r, row in rows:
        meta = _metadata(row, fingerprint)
        yield b'{"id": ' + _ID_JSON.encode(meta["sample_id"]).encode() + b', "input_ids": ['
        yield ids.row(r)
        yield b'], "loss_mask": ['
        yield from masks.row(r)
        yield b'], "metadata": ' + _META_JSON.encode(meta).encode() + b"}\n"


def _metadata(row: dict[str, Any], fingerprint: str) -> dict[str, Any]:
    """Where a speculators row came from (its ``metadata`` object)."""
    return {
        "sample_id": row["sample_id"],
        "prompt_len": row["prompt_len"],
        "finish_reason": row["finish_reason"],
        "matched_stop": row["matched_stop"],
        "flags": list(row["flags"] or ()),
        "think_end": row["think_end"],
        "endpoint": row["endpoint"],
        "rid": row["rid"],
        "tokenizer_fingerprint": fingerprint,
        **{name: row[name] for name in TURN_COLUMNS if name in row},  # multi-turn batches
    }


def with_loss_mask(table: pa.Table, mask_start: MaskStart) -> pa.Table:
    """``table`` plus a ``loss_mask`` list<int8> column aligned with ``input_ids``: per row,
    ``start`` zeros then ones, made for all rows by one ``np.repeat``."""
    bounds = RowBounds.of(table, mask_start)
    counts = np.column_stack([bounds.starts, bounds.lengths - bounds.starts]).ravel()
    bits = np.tile(np.array([0, 1], np.int8), len(bounds.lengths))
    values = numpy_array(np.repeat(bits, counts))
    mask = pa.ListArray.from_arrays(bounds.offsets, values, type=MASK_TYPE)
    return table.append_column(pa.field("loss_mask", MASK_TYPE, nullable=False), mask)

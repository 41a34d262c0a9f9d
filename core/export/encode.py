"""Kept rows of one row group -> the bytes of each format, ids untouched.

Token ids never pass through a tokenizer or a float: the ``input_ids`` list column is cast
int32 -> decimal text by Arrow and joined per row, so the JSON holds exactly the stored
integers (tests compare every exported row to its shard row id for id). Masks are built
from ``prompt_len`` alone.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from eagle_tui.core.export.options import ExportFormat, MaskStart, mask_offset
from eagle_tui.core.shards.schema import TURN_COLUMNS

JSONL_COLUMNS = ("sample_id", "input_ids", "prompt_len", "finish_reason", "matched_stop",
                 "think_end", "flags", "endpoint", "rid")
MASK_TYPE = pa.list_(pa.field("element", pa.int8()))


def mask_starts(table: pa.Table, mask_start: MaskStart) -> list[int]:
    """Index of each row's first 1 in ``loss_mask`` (never negative)."""
    offset = mask_offset(mask_start)
    return [max(prompt - offset, 0) for prompt in table.column("prompt_len").to_pylist()]


def ids_texts(ids: pa.ChunkedArray | pa.ListArray) -> list[str]:
    """``"1, 2, 3"`` per row: the ids as JSON integers, joined in Arrow (no Python ints)."""
    offsets, values = _flat(ids)
    text = pc.cast(values, pa.string())
    joined = pc.binary_join(pa.ListArray.from_arrays(offsets, text), ", ")
    return [value or "" for value in joined.to_pylist()]


def _flat(ids: pa.ChunkedArray | pa.ListArray) -> tuple[pa.Array, pa.Array]:
    """Offsets starting at 0 and the values they index, for a list column that may be
    chunked or a slice (``.values`` would ignore a slice; ``flatten`` does not)."""
    lists = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    offsets = lists.offsets
    first = offsets[0].as_py() if len(offsets) else 0
    if first:
        offsets = pc.subtract(offsets, pa.scalar(first, pa.int32()))
    return offsets, lists.flatten()


def mask_text(start: int, length: int) -> str:
    """``"0, 0, 1, 1"``: ``start`` zeros then ones up to ``length`` entries."""
    start = min(start, length)
    return ("0, " * start + "1, " * (length - start))[:-2]


def jsonl_lines(table: pa.Table, fmt: ExportFormat, mask_start: MaskStart,
                fingerprint: str) -> str:
    """The JSONL text of ``table``'s rows (each line ends with a newline).

    speculators: ``{"id", "input_ids", "loss_mask", "metadata"}`` (the row shape its own
    regeneration writes); specforge: ``{"input_ids", "loss_mask"}`` (``data.prompts_path``).
    """
    ids = ids_texts(table.column("input_ids"))
    lengths = pc.list_value_length(table.column("input_ids")).to_pylist()
    starts = mask_starts(table, mask_start)
    if fmt == "specforge":
        return "".join(
            f'{{"input_ids": [{i}], "loss_mask": [{mask_text(s, n)}]}}\n'
            for i, s, n in zip(ids, starts, lengths, strict=True)
        )
    meta = [_metadata(row, fingerprint) for row in table.drop_columns(["input_ids"]).to_pylist()]
    return "".join(
        f'{{"id": {json.dumps(m["sample_id"])}, "input_ids": [{i}], '
        f'"loss_mask": [{mask_text(s, n)}], "metadata": {json.dumps(m, sort_keys=True)}}}\n'
        for i, s, n, m in zip(ids, starts, lengths, meta, strict=True)
    )


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
    """``table`` plus a ``loss_mask`` list<int8> column aligned with ``input_ids``."""
    offsets, _ = _flat(table.column("input_ids"))
    lengths = pc.list_value_length(table.column("input_ids")).to_pylist()
    starts = mask_starts(table, mask_start)
    flat = b"".join(
        b"\x00" * min(s, n) + b"\x01" * (n - min(s, n)) for s, n in zip(starts, lengths,
                                                                     strict=True)
    )
    values = pa.Array.from_buffers(pa.int8(), len(flat), [None, pa.py_buffer(flat)])
    mask = pa.ListArray.from_arrays(offsets, values, type=MASK_TYPE)
    return table.append_column(pa.field("loss_mask", MASK_TYPE, nullable=False), mask)

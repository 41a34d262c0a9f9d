"""One sample as a JSON document (``e`` in the sample screen): ids exact, text as decoded.

Pure: the screen writes the bytes (in a worker) where ``export_path`` says.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from eagle_tui.core.shards.render import marker_text
from eagle_tui.core.shards.schema import ShardRow
from eagle_tui.tui.render.tokens import Piece, TokenDocument

UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def decoded_text(document: TokenDocument, *, output: bool = True) -> str | None:
    """The decoded text of the output (or the prompt), boundary tokens kept as
    ``eagle-tui inspect`` prints them (``⟦</think> 163607⟧``); None when not decoded."""
    if not document.decoded:
        return None
    parts: list[str] = []
    position = 0
    for piece in document.pieces:
        in_prompt = position < document.prompt_len  # the prompt's own final <think> too
        position += len(piece.ids)
        if in_prompt != output:
            parts.append(piece_text(piece))
    return "".join(parts)


def piece_text(piece: Piece) -> str:
    """Decoded text, or a boundary token as ``inspect`` prints it."""
    if piece.marker:
        return marker_text(piece.kind, piece.ids[0], piece.text or None)
    return piece.text


def sample_json(row: ShardRow, document: TokenDocument, decoder_note: str) -> bytes:
    """The sample: every stored field, ``prompt_ids``/``output_ids`` and, when a tokenizer
    decoded it, the prompt and output text."""
    data = {
        "sample_id": row.sample_id,
        "prompt_len": row.prompt_len,
        "finish_reason": row.finish_reason,
        "matched_stop": row.matched_stop,
        "think_end": row.think_end,
        "flags": list(row.flags),
        "endpoint": row.endpoint,
        "rid": row.rid,
        "latency_s": row.latency_s,
        "created_at": row.created_at.isoformat(),
        "input_ids": list(row.input_ids),
        "prompt_ids": list(row.prompt_ids),
        "output_ids": list(row.output_ids),
        "decoded": None if not document.decoded else {
            "prompt": decoded_text(document, output=False),
            "output": decoded_text(document),
            "note": decoder_note,
        },
    }
    return (json.dumps(data, ensure_ascii=False, indent=1) + "\n").encode("utf-8")


def export_path(directory: Path, sample_id: str) -> Path:
    """``<directory>/eagle-sample-<id>.json`` (the id made safe for a file name)."""
    return directory / f"eagle-sample-{UNSAFE.sub('_', sample_id)[:120]}.json"

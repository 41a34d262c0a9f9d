"""Stable sample ids: the record's own ``id``, else a content hash of what is sent.

A sample id must survive a restart (resume skips ids already in complete shards), so it
never depends on file position or time. The content hash covers the *normalized* messages
(trailing assistant turns already dropped) and tools, so the same conversation gets the
same id whether it came as OpenAI ``messages`` or ShareGPT ``conversations``, JSONL or
parquet.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

CONTENT_ID_HEX = 16
"""Hex digits kept from the sha256 (64 bits: collisions are negligible below ~10^8 prompts)."""

VARIANT_SEPARATOR = "#"
TURN_SEPARATOR = "#turn"
"""Between a conversation's id and its turn in a multi-turn row id: ``c004#turn0``."""

MAX_ID_CHARS = 256
"""Longest record ``id`` accepted: ids end up in parquet, logs, terminals and file names."""

_REFUSED_CATEGORIES = {
    "Cc": "a control character",
    "Cf": "an invisible formatting character",
    "Cs": "a lone surrogate (not valid Unicode; check the file's encoding)",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}


def id_problem(text: str) -> str | None:
    """Why ``text`` cannot be a sample id, or None when it can.

    An id must be storable as UTF-8 (parquet refuses lone surrogates, which would drop a
    whole shard), printable (it is shown in terminals and logs), non-blank and at most
    :data:`MAX_ID_CHARS` characters.
    """
    if len(text) > MAX_ID_CHARS:
        return f"'id' is {len(text)} characters long; at most {MAX_ID_CHARS} are allowed"
    if not text.strip():
        return "'id' is empty; give a non-empty id or leave it out"
    if text.isprintable():  # the common case, at C speed
        return None
    for position, char in enumerate(text):
        what = _REFUSED_CATEGORIES.get(unicodedata.category(char))
        if what is not None:
            shown = char.encode("unicode_escape").decode("ascii")
            return f"'id' holds {what} ({shown}) at character {position}"
    return None


def canonical_json(value: object) -> str:
    """JSON with sorted keys, no spaces and real unicode: equal data gives equal text."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )


def content_sample_id(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> str:
    """First ``CONTENT_ID_HEX`` hex digits of sha256(canonical JSON of messages and tools)."""
    payload = canonical_json({"messages": list(messages), "tools": list(tools or [])})
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:CONTENT_ID_HEX]


def variant_id(base: str, *, preset: str | None = None, repeat: int = 0) -> str:
    """The id of one generation of a prompt: ``base``, plus a suffix per preset and repeat.

    ``variant_id("a")`` is ``"a"``; ``variant_id("a", preset="t07", repeat=2)`` is
    ``"a#t07#r2"``. Repeat 0 and no preset add nothing, so a single-preset, single-repeat
    batch keeps the record ids unchanged.
    """
    if repeat < 0:
        raise ValueError(f"repeat must be >= 0, got {repeat}")
    parts = [base]
    if preset:
        parts.append(preset)
    if repeat:
        parts.append(f"r{repeat}")
    return VARIANT_SEPARATOR.join(parts)


MAX_SLICES = 10_000
"""Largest N of ``--shard I/N``: one batch directory per slice, on as many nodes."""

_SLICE = re.compile(r"^\s*(\d{1,9})\s*/\s*(\d{1,9})\s*$")


def parse_slice(text: str) -> tuple[int, int]:
    """``"I/N"`` (a ``--shard`` slice of a job split by sample id) as ``(I, N)``; ValueError
    saying what is wrong unless ``0 <= I < N <= MAX_SLICES``."""
    match = _SLICE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not I/N; want slice I (0-based) of N, e.g. 0/4")
    index, count = int(match[1]), int(match[2])
    if not 1 <= count <= MAX_SLICES or index >= count:
        raise ValueError(f"{index}/{count}: want I/N with 0 <= I < N <= {MAX_SLICES} "
                         "(e.g. 0/4 1/4 2/4 3/4 on four nodes)")
    return index, count


def turn_of(sample_id: str) -> int | None:
    """The turn in a row id ``<conversation>#turn<k>`` (None when it has none)."""
    _, separator, turn = sample_id.rpartition(TURN_SEPARATOR)
    return int(turn) if separator and turn.isdigit() else None

"""Token sequences as display documents: segments decoded to literal text, then styled.

Pure functions, no widgets: ``build_document`` turns ids (with the prompt length and the
boundary ids) into a ``TokenDocument`` of pieces — a piece is one segment from
``core.segments`` with its decoded text — and ``document_content`` turns a document into a
Textual ``Content`` built from literal strings (never markup), in decoded-text or raw-ids
form. Every boundary token gets a visible marker (``‹think›``, ``‹/think›``, ``‹call›`` …,
``‹stop›``) so the kinds read apart without colour too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from textual.content import Content
from textual.style import Style

from eagle_tui.core import kimi
from eagle_tui.core.segments import SegmentKind, split_segments
from eagle_tui.core.validate import Boundaries
from eagle_tui.tui.render import literal

ViewMode = Literal["text", "ids"]
Decoder = Callable[[Sequence[int]], str]
TokenText = Callable[[int], "str | None"]

SEGMENT_KINDS: tuple[SegmentKind, ...] = (
    "prompt",
    "think_start",
    "reasoning",
    "think_end",
    "answer",
    "tool_call",
    "tool_args",
    "stop",
)
TOOL_MARKERS: Mapping[str, str] = {
    "<|tool_calls_section_begin|>": "tools",
    "<|tool_calls_section_end|>": "/tools",
    "<|tool_call_begin|>": "call",
    "<|tool_call_argument_begin|>": "args",
    "<|tool_call_end|>": "/call",
}
_FIXED_MARKERS: Mapping[str, str] = {"think_start": "think", "think_end": "/think", "stop": "stop"}


@dataclass(frozen=True, slots=True)
class Piece:
    """One segment: its kind, ids, decoded text ("" when not decoded; a boundary token's own
    text, when known) and marker label."""

    kind: SegmentKind
    ids: tuple[int, ...]
    text: str = ""
    marker: str = ""


@dataclass(frozen=True, slots=True)
class TokenDocument:
    """A sequence ready to display. ``decoded`` is False when no tokenizer was available."""

    pieces: tuple[Piece, ...]
    prompt_len: int
    decoded: bool

    @property
    def total_ids(self) -> int:
        """Number of ids in the sequence."""
        return sum(len(p.ids) for p in self.pieces)


EMPTY_DOCUMENT = TokenDocument((), 0, decoded=False)


def marker_label(kind: SegmentKind, token_text: str | None = None) -> str:
    """``‹think›``, ``‹/think›``, ``‹stop›``, or a tool-call marker such as ``‹call›``."""
    if kind == "tool_call":
        return f"‹{TOOL_MARKERS.get(token_text or '', 'tool')}›"
    return f"‹{_FIXED_MARKERS.get(kind, kind)}›"


def make_piece(
    kind: SegmentKind, ids: Sequence[int], decode: Decoder | None, token_text: TokenText | None
) -> Piece:
    """A piece for ``ids`` of ``kind``: markers get a label, other kinds decoded text."""
    ids_tuple = tuple(ids)
    if kind in ("think_start", "think_end", "tool_call", "stop"):
        text_of = token_text(ids_tuple[0]) if token_text and ids_tuple else None
        return Piece(kind, ids_tuple, text=text_of or "", marker=marker_label(kind, text_of))
    return Piece(kind, ids_tuple, text=decode(ids_tuple) if decode else "")


def build_document(
    ids: Sequence[int],
    prompt_len: int,
    boundary: Boundaries,
    *,
    decode: Decoder | None = None,
    token_text: TokenText | None = None,
) -> TokenDocument:
    """Split ``ids`` into segments and decode each (CPU work: call it from a worker)."""
    pieces = tuple(
        make_piece(seg.kind, ids[seg.start : seg.end], decode, token_text)
        for seg in split_segments(ids, prompt_len, boundary)
    )
    return TokenDocument(pieces, prompt_len, decoded=decode is not None)


_KIMI_TOOL_TEXT: Mapping[int, str] = dict(
    zip(sorted(kimi.TOOL_CALL_IDS), kimi.TOOL_CALL_TOKENS, strict=True)
)


def kimi_token_text(token_id: int) -> str | None:
    """Token text of Kimi's tool-call ids, when no tokenizer is loaded (raw-ids mode)."""
    return _KIMI_TOOL_TEXT.get(token_id)


StyleMap = Mapping[str, Style | str]


def document_content(
    document: TokenDocument, mode: ViewMode, styles: StyleMap, *, show_prompt: bool = True
) -> Content:
    """The document as literal styled text; ``mode`` "ids" shows the raw ids instead."""
    parts: list[tuple[str, Style | str]] = []
    for piece in document.pieces:
        if piece.kind == "prompt" and not show_prompt:
            continue
        parts.append((_piece_text(piece, mode, document.decoded), styles.get(piece.kind, "")))
        if mode == "ids":
            parts.append((" ", ""))
    return literal.assemble(*parts)


def _piece_text(piece: Piece, mode: ViewMode, decoded: bool) -> str:
    if piece.marker:
        return f"{piece.marker}{piece.ids[0]}" if mode == "ids" else piece.marker
    if mode == "ids" or not decoded:
        return " ".join(map(str, piece.ids))
    return piece.text

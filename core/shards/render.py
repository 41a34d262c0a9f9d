"""One stored sample as ``rich`` Text: segments decoded one by one, each kind styled AND
labelled in the text itself, so it reads without colour (``NO_COLOR``) too.

- a content segment (prompt, reasoning, answer, tool_args) starts with ``«kind»``;
- a marker (think_start, think_end, tool_call, stop) prints as ``⟦token id⟧``, e.g.
  ``⟦</think> 163607⟧``;
- model text is appended literally (never parsed as markup); control characters other than
  newline and tab print as visible escapes (``\\x1b``) so model output cannot drive the
  terminal.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from rich.text import Text

from eagle_tui.core.segments import Segment, SegmentKind

Decode = Callable[[Sequence[int]], str]
TokenName = Callable[[int], "str | None"]

STYLES: dict[SegmentKind, str] = {
    "prompt": "grey62",
    "think_start": "bold black on magenta",
    "reasoning": "cyan",
    "think_end": "bold black on magenta",
    "answer": "bright_white",
    "tool_call": "bold black on yellow",
    "tool_args": "yellow",
    "stop": "bold white on red",
}
LABEL_STYLE = "dim italic"
ESCAPE_STYLE = "reverse"

# C0 controls except \t and \n, DEL, and C1 controls: printed as escapes, never raw.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def sample_text(
    ids: Sequence[int],
    segments: Sequence[Segment],
    decode: Decode,
    token_name: TokenName,
    *,
    first_prompt_id: int = 0,
) -> Text:
    """The whole sequence as Text. Prompt ids before ``first_prompt_id`` are left out
    (with a note saying how many), for long prompts."""
    text = Text()
    for segment in segments:
        start = segment.start
        if segment.kind == "prompt" and first_prompt_id > start:
            start = min(first_prompt_id, segment.end)
            text.append(f"«… {start - segment.start} prompt tokens not shown»", LABEL_STYLE)
            if start == segment.end:
                continue
        if segment.is_marker:
            append_marker(text, segment.kind, ids[segment.start], token_name)
        else:
            text.append(f"«{segment.kind}»", f"{LABEL_STYLE} {STYLES[segment.kind]}")
            append_literal(text, decode(ids[start : segment.end]), STYLES[segment.kind])
    return text


def append_marker(text: Text, kind: SegmentKind, token_id: int, token_name: TokenName) -> None:
    """``⟦name id⟧`` in the marker's style (the name is the token text when known)."""
    append_literal(text, marker_text(kind, token_id, token_name(token_id)), STYLES[kind])


def marker_text(kind: SegmentKind, token_id: int, name: str | None) -> str:
    """A boundary token as ``inspect`` prints it: ``⟦</think> 163607⟧`` (its kind when its
    text is not known: ``⟦stop 163586⟧``)."""
    return f"⟦{name} {token_id}⟧" if name else f"⟦{kind} {token_id}⟧"


def append_literal(text: Text, content: str, style: str) -> None:
    """Append ``content`` as plain text, control characters shown as escapes."""
    position = 0
    for match in _CONTROL.finditer(content):
        text.append(content[position : match.start()], style)
        text.append(match.group().encode("unicode_escape").decode("ascii"), ESCAPE_STYLE)
        position = match.end()
    text.append(content[position:], style)


def legend() -> Text:
    """A one-line key of the kinds and their styles."""
    text = Text("key: ", LABEL_STYLE)
    for kind, style in STYLES.items():
        text.append(f" {kind} ", style)
    return text

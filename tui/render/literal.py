"""Text from outside, made safe where it enters the screen: no control or escape sequence
reaches the terminal, every one is shown (``␛]0;…``).

Server logs, server answers, prompt files, shards and batch names are written by others, and
a terminal executes what they hold: ``ESC ] 0 ;`` retitles the window, ``ESC ] 52 ;`` writes
the clipboard, other sequences change the keyboard mode (``q`` stops working). Rich's
``Text`` and Textual's ``Content`` remove only BEL, BS, VT, FF and CR; ESC, the other C0/C1
controls, DEL, bidi overrides and lone surrogates pass through to the terminal.

So the dashboard builds every piece of text it shows through these constructors, which pass
the strings through ``core.text.terminal_safe`` (newlines and tabs keep their meaning), the
way toolong converts each line once where it is parsed. ``tests/test_source_rules.py``
fails when a module of the dashboard builds ``Text``/``Content`` or a toast from a string
any other way. The verbs print Rich renderables through ``literal_rich.Literal`` (no
Textual), which makes the text of every segment safe as it is written.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.content import Content
from textual.style import Style

from eagle_tui.tui.render.literal_rich import Literal, rich_text, shown

__all__ = ["Literal", "Part", "assemble", "content", "lines", "rich_text", "shown", "styled"]

Part = str | tuple[str, str | Style] | Content
"""A piece of ``assemble``: plain text, text with a style, or content already made."""


def content(text: str) -> Content:
    """Textual content showing ``text`` literally (never markup)."""
    return Content(shown(text))


def styled(text: str, style: str | Style) -> Content:
    """``content`` in ``style``."""
    return Content.styled(shown(text), style)


def assemble(*parts: Part) -> Content:
    """Content of ``parts`` laid end to end, each string shown literally."""
    return Content.assemble(*(_safe_part(part) for part in parts))


def lines(texts: Iterable[str]) -> Content:
    """One line per string of ``texts``."""
    return Content("\n").join(content(text) for text in texts)


def _safe_part(part: Part) -> Part:
    if isinstance(part, str):
        return shown(part)
    if isinstance(part, tuple):
        return (shown(part[0]), part[1])
    return part

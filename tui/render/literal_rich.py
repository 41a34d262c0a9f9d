"""Outside text shown literally in Rich output, without Textual (the verbs print with it;
``tui.render.literal`` adds Textual's constructors for the dashboard).

``Literal`` wraps a renderable: the text of every segment it renders passes through
``core.text.terminal_safe``, so what a table or a panel was built from (a sample id, a
server's reason, a flag name read from a shard) cannot reach the terminal as escape
sequences; Rich's own colour and cursor sequences pass.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from eagle_tui.core.text import terminal_safe


def shown(text: str) -> str:
    """``text`` with every control character shown (newlines and tabs kept)."""
    return terminal_safe(text, multiline=True)


def rich_text(text: str, style: str | Style = "", **options: Any) -> Text:
    """A Rich ``Text`` showing ``text`` literally (table cells, the verbs' output)."""
    return Text(shown(text), style, **options)


class Literal:
    """A Rich renderable printed with the text of every segment shown literally."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.renderable, options):
            if segment.control or segment.text.isprintable():
                yield segment
            else:
                yield Segment(shown(segment.text), segment.style)

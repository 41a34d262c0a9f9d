"""A token sequence shown literally, with every segment kind styled and every boundary token
marked; ``t`` switches between decoded text and raw ids.

The widget only renders a ``TokenDocument`` (built in a worker by ``tui.render.tokens``).
Kind styles are component classes (``token--reasoning`` …) set in ``styles/tokens.tcss``
from theme variables, so themes restyle them.
"""

from __future__ import annotations

from typing import ClassVar

from textual.content import Content
from textual.reactive import reactive
from textual.style import Style
from textual.widget import Widget

from eagle_tui.tui.render import literal
from eagle_tui.tui.render.tokens import (
    EMPTY_DOCUMENT,
    SEGMENT_KINDS,
    StyleMap,
    TokenDocument,
    ViewMode,
    document_content,
)
from eagle_tui.tui.widgets.styling import component_style

LEGEND: tuple[tuple[str, str], ...] = (
    ("prompt", "prompt"),
    ("think_start", "‹think›"),
    ("reasoning", "reasoning"),
    ("think_end", "‹/think›"),
    ("answer", "answer"),
    ("tool_call", "‹call›"),
    ("tool_args", "tool args"),
    ("stop", "‹stop›"),
)


def component_class(kind: str) -> str:
    """The component class that styles segments of ``kind``."""
    return f"token--{kind.replace('_', '-')}"


class TokenStyled(Widget):
    """Base for widgets that style text by segment kind from ``token--*`` component classes."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {component_class(kind) for kind in SEGMENT_KINDS}

    _styles: StyleMap | None = None

    def kind_styles(self) -> StyleMap:
        """Kind -> style, resolved from the stylesheet (so from the theme); cached until the
        styles change."""
        if self._styles is None:
            self._styles = {
                kind: component_style(self, component_class(kind)) for kind in SEGMENT_KINDS
            }
        return self._styles

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None


class TokenView(TokenStyled):
    """Renders one ``TokenDocument``; ``mode`` is "text" (decoded) or "ids" (raw ids).

    With ``tail=True`` the widget has a fixed height and shows the last lines that fit (a
    live stream): an update then repaints it without a layout pass over the screen.
    """

    mode: reactive[ViewMode] = reactive[ViewMode]("text", layout=True)
    show_prompt: reactive[bool] = reactive(True, layout=True)

    def __init__(
        self,
        document: TokenDocument = EMPTY_DOCUMENT,
        *,
        tail: bool = False,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self._document = document
        self.tail = tail
        self._cache: Content | None = None
        self._tail_cache: tuple[int, int, Content] | None = None

    @property
    def document(self) -> TokenDocument:
        """The document shown."""
        return self._document

    def show(self, document: TokenDocument) -> None:
        """Display ``document`` (replaces the previous one; one refresh)."""
        self._document = document
        self._invalidate()

    def toggle_mode(self) -> None:
        """Switch between decoded text and raw ids."""
        self.mode = "ids" if self.mode == "text" else "text"

    def watch_mode(self) -> None:
        self._invalidate()

    def watch_show_prompt(self) -> None:
        self._invalidate()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache = None
        self._tail_cache = None

    def _invalidate(self) -> None:
        self._cache = None
        self._tail_cache = None
        self.refresh(layout=not self.tail)

    def render(self) -> Content:
        if self._cache is None:
            self._cache = document_content(
                self._document, self.mode, self.kind_styles(), show_prompt=self.show_prompt
            )
        return self._last_lines(self._cache) if self.tail else self._cache

    def _last_lines(self, content: Content) -> Content:
        """The last lines of ``content`` that fit the widget, once wrapped to its width."""
        width, height = self.size.width, self.size.height
        if width <= 0 or height <= 0:
            return content
        cached = self._tail_cache
        if cached is None or cached[:2] != (width, height):
            lines = content.wrap(width)
            cached = (width, height, Content("\n").join(lines[-height:]))
            self._tail_cache = cached
        return cached[2]


class TokenLegend(TokenStyled):
    """One line naming each segment kind in its own style (the key to the colours)."""

    def render(self) -> Content:
        styles = self.kind_styles()
        parts: list[str | tuple[str, Style | str]] = []
        for kind, label in LEGEND:
            parts.extend(((label, styles[kind]), " "))
        return literal.assemble(*parts)

"""The Fleet view's table: one row per server, drawn line by line with each row's line kept.

Textual's ``DataTable`` renders every visible cell again after any cell changes (its cell
cache is keyed by a table-wide update count): with 64 servers whose tok/s change every
second, that was 0.1-0.5 s of the UI thread per redraw. This table draws a row's line once
per distinct content (and cursor, width, style) and looks it up otherwise, so a redraw
costs what changed. Keys: ``j``/``k`` or arrows move, ``g``/``G`` (Home/End) first and
last row, PgUp/PgDn; ``Esc`` clears the filter; a click on a header sorts, on a row opens it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from eagle_tui.tui.render.fleet import COLUMNS, FleetRow, cells

PAD = 1
"""Blank cells each side of a column (as ``DataTable``'s default padding)."""
TONE_CLASS = {"warn": "fleet-table--warn", "bad": "fleet-table--bad"}
"""How the phase cell reads: a down or crashed server stands out at a glance."""


class FleetTable(ScrollView, can_focus=True):
    """``show(rows)`` shows ``rows`` in that order; the cursor stays on its server."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "fleet-table--header", "fleet-table--cursor", *TONE_CLASS.values()}
    DEFAULT_CSS = """
    FleetTable {
        background: $surface;
        color: $foreground;
        & > .fleet-table--header { text-style: bold; background: $panel; color: $foreground; }
        & > .fleet-table--cursor { background: $block-cursor-blurred-background; }
        &:focus > .fleet-table--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
        & > .fleet-table--warn { text-style: bold; }
        & > .fleet-table--bad { text-style: bold reverse; }
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down,j", "move(1)", "Down", show=False, id="table.down"),
        Binding("up,k", "move(-1)", "Up", show=False, id="table.up"),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("home,g", "first_row", "First", show=False, id="table.first"),
        Binding("end,G", "last_row", "Last", show=False, id="table.last"),
        Binding("escape", "clear_search", "Clear filter", show=False, id="table.clear"),
    ]

    class FilterCleared(Message):
        """Esc cleared the filter (the view shows every server again at once)."""

    class HeaderClicked(Message):
        """A click on column ``column``'s header (the view sorts by it)."""

        def __init__(self, column: int) -> None:
            super().__init__()
            self.column = column

    class RowClicked(Message):
        """A click on a row (the view opens that server)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.shown: tuple[FleetRow, ...] = ()
        self.cursor_row = 0
        self.search = ""
        self._texts: list[tuple[str, ...]] = []
        self._widths = [cell_len(name) for name in COLUMNS]
        self._lines: dict[tuple[object, ...], Strip] = {}

    @property
    def row_count(self) -> int:
        return len(self.shown)

    # -- what is shown -----------------------------------------------------------------------

    def show(self, rows: Sequence[FleetRow]) -> None:
        """Show ``rows`` in this order, the cursor kept on its server when it is still there;
        only the lines that changed are drawn again."""
        before, current = self.shown, self.selected_row()
        self.shown = tuple(rows)
        self._texts = [cells(row) for row in rows]
        keys = [row.key for row in rows]
        if current is not None and current.key in keys:
            self.cursor_row = keys.index(current.key)
        self.cursor_row = max(0, min(self.cursor_row, len(rows) - 1))
        if len(self._lines) > 8 * (len(rows) + 1):
            self._lines.clear()  # rows that are gone, or old content: keep the cache small
        widths = [max([cell_len(name), *(cell_len(t[i]) for t in self._texts)])
                  for i, name in enumerate(COLUMNS)]
        self.virtual_size = Size(sum(width + 2 * PAD for width in widths), len(rows) + 1)
        if widths != self._widths or [row.key for row in before] != keys:
            self._widths = widths  # a wider cell widens its column, never cut
            self.refresh()
            return
        for index, (old, new) in enumerate(zip(before, self.shown, strict=True)):
            if old != new:
                self.refresh_line(index + 1)  # the header is line 0

    def selected_row(self) -> FleetRow | None:
        """The server under the cursor."""
        if not 0 <= self.cursor_row < len(self.shown):
            return None
        return self.shown[self.cursor_row]

    def move_cursor(self, row: int) -> None:
        """Put the cursor on ``row`` (clamped) and scroll it into view."""
        self.cursor_row = max(0, min(row, len(self.shown) - 1))
        visible = max(1, self.size.height - 1)  # the header line stays on top
        top = round(self.scroll_offset.y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= top + visible:
            self.scroll_to(y=self.cursor_row - visible + 1, animate=False)
        self.refresh()

    # -- drawing -----------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        if y == 0:
            line = self._header()
        else:
            index = scroll_y + y - 1
            if index >= len(self.shown):
                return Strip.blank(self.size.width, self.rich_style)
            line = self._row_line(index)
        return line.crop_extend(scroll_x, scroll_x + self.size.width, self.rich_style)

    def _header(self) -> Strip:
        style = self.rich_style + self.get_component_rich_style("fleet-table--header")
        key = ("header", style, tuple(self._widths))
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = Strip(
                [Segment(self._cell(name, i), style) for i, name in enumerate(COLUMNS)])
        return line

    def _row_line(self, index: int) -> Strip:
        row, texts = self.shown[index], self._texts[index]
        style = self.rich_style
        if index == self.cursor_row:
            style += self.get_component_rich_style("fleet-table--cursor")
        tone = TONE_CLASS.get(row.tone)
        phase_style = style + self.get_component_rich_style(tone) if tone else style
        key = (texts, phase_style, style, tuple(self._widths))
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = Strip(
                [Segment(self._cell(text, i), phase_style if i == 1 else style)
                 for i, text in enumerate(texts)])
        return line

    def _cell(self, text: str, column: int) -> str:
        return " " * PAD + set_cell_size(text, self._widths[column]) + " " * PAD

    def _column_at(self, x: int) -> int | None:
        edge = 0
        for column, width in enumerate(self._widths):
            edge += width + 2 * PAD
            if x < edge:
                return column
        return None

    def on_focus(self) -> None:
        self.refresh()  # the cursor's colour follows the focus

    def on_blur(self) -> None:
        self.refresh()

    # -- keys and the mouse ------------------------------------------------------------------

    def action_move(self, step: int) -> None:
        self.move_cursor(self.cursor_row + step)

    def action_page(self, step: int) -> None:
        self.move_cursor(self.cursor_row + step * max(1, self.size.height - 2))

    def action_first_row(self) -> None:
        self.move_cursor(0)

    def action_last_row(self) -> None:
        self.move_cursor(len(self.shown) - 1)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "clear_search":
            return bool(self.search)  # False: Esc goes on to the view
        return True

    def set_search(self, text: str) -> None:
        """Keep only rows holding ``text`` (the view filters; this remembers it for Esc)."""
        self.search = text.strip()
        self.refresh_bindings()

    def action_clear_search(self) -> None:
        self.set_search("")
        self.post_message(self.FilterCleared())

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        scroll_x, scroll_y = self.scroll_offset
        if offset.y == 0:
            column = self._column_at(offset.x + scroll_x)
            if column is not None:
                self.post_message(self.HeaderClicked(column))
            return
        index = scroll_y + offset.y - 1
        if 0 <= index < len(self.shown):
            self.move_cursor(index)
            self.post_message(self.RowClicked())

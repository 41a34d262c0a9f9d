"""The Fleet view's table: one row per server, kept in the order and filter it is given."""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.text import Text
from textual.message import Message
from textual.widgets.data_table import ColumnKey

from eagle_tui.tui.render import literal
from eagle_tui.tui.render.fleet import COLUMNS, FleetRow, cells
from eagle_tui.tui.widgets.nav_table import NavTable

TONE_STYLE = {"ok": "", "busy": "", "warn": "bold", "bad": "bold reverse"}
"""How the phase cell reads: a down or crashed server stands out at a glance."""


class FleetTable(NavTable):
    """``show(rows)`` updates cells in place while the rows and their order stay, and
    rebuilds the rows (the cursor kept on its server) when they change."""

    class FilterCleared(Message):
        """Esc cleared the filter (the view shows every server again at once)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.add_columns(*COLUMNS)
        self.shown: tuple[FleetRow, ...] = ()

    def show(self, rows: Sequence[FleetRow]) -> None:
        """Show ``rows`` in this order."""
        keys = [row.key for row in rows]
        if keys == [row.key for row in self.shown]:
            self._update(rows)
        else:
            self._rebuild(rows)
        self.shown = tuple(rows)

    def _update(self, rows: Sequence[FleetRow]) -> None:
        for old, new in zip(self.shown, rows, strict=True):
            if old == new:
                continue
            for column, before, after in zip(self.columns, cells(old), cells(new), strict=True):
                if before != after or old.tone != new.tone:
                    self.update_cell(new.key, column, _cell(new, column == 1, after),
                                     update_width=self._wider(column, after))

    def _wider(self, column: ColumnKey, text: str) -> bool:
        """True when ``text`` does not fit its column (a flag raised later is longer than
        the cell was: widen, never cut it). Only then is the width measured again: that
        measures every updated cell, ~7 ms a frame per changed row."""
        return cell_len(text) > self.columns[column].content_width

    def _rebuild(self, rows: Sequence[FleetRow]) -> None:
        current = self.selected_row()
        self.clear()
        for row in rows:
            self.add_row(*(_cell(row, i == 1, text) for i, text in enumerate(cells(row))),
                         key=row.key)
        keys = [row.key for row in rows]
        if current is not None and current.key in keys:
            self.move_cursor(row=keys.index(current.key), animate=False)

    def selected_row(self) -> FleetRow | None:
        """The server under the cursor."""
        if not self.shown or not 0 <= self.cursor_row < len(self.shown):
            return None
        return self.shown[self.cursor_row]

    def action_clear_search(self) -> None:
        super().action_clear_search()
        self.post_message(self.FilterCleared())


def _cell(row: FleetRow, is_phase: bool, text: str) -> Text:
    if is_phase and TONE_STYLE[row.tone]:
        return literal.rich_text(text, TONE_STYLE[row.tone])
    return literal.rich_text(text)

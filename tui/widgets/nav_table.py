"""A ``DataTable`` with the dashboard's one keyboard model: ``j``/``k`` down and up, ``g``/``G``
first and last row, ``n``/``N`` next and previous matching row while a search is set (``/``,
the view's search box, sets it), ``Esc`` clears it (``n`` then falls back to the view's
own key, e.g. next page or new batch)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar, Protocol, runtime_checkable

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from eagle_tui.tui.render import literal


def row_matches(cells: Sequence[object], needle: str) -> bool:
    """True when any cell's text holds ``needle`` (case-insensitive)."""
    wanted = needle.lower()
    for cell in cells:
        text = cell.plain if isinstance(cell, Text) else str(cell)
        if wanted in text.lower():
            return True
    return False


def column_widths(labels: Sequence[str], rows: Iterable[Sequence[Text]]) -> tuple[int, ...]:
    """Each column's width in cells: its widest cell, or its label if that is wider."""
    widths = [cell_len(label) for label in labels]
    for cells in rows:
        widths = [max(width, cell.cell_len) for width, cell in zip(widths, cells, strict=True)]
    return tuple(widths)


def set_columns(table: DataTable[Text], labels: Sequence[str], widths: Sequence[int]) -> None:
    """Empty ``table`` and give it these columns at these fixed widths.

    Why fixed: a DataTable measures auto-width columns only when it is next idle, and caches
    cells drawn before then at the old width without noticing the change (Textual #3533).
    Under load a frame can come first, and the Inspect view was once left with every column
    at its label's width (``⚑ too`` for ``⚑ tool_call``) until the next page."""
    table.clear(columns=True)
    for label, width in zip(labels, widths, strict=True):
        table.add_column(literal.rich_text(label), width=width)


@runtime_checkable
class SearchableTable(Protocol):
    """A table ``/`` searches (or filters): ``NavTable``, the Fleet view's table."""

    search: str

    def set_search(self, text: str) -> object: ...


class NavTable(DataTable[Text]):
    """Rows with vi-style keys and a text search over every cell."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False, id="table.down"),
        Binding("k", "cursor_up", "Up", show=False, id="table.up"),
        Binding("g", "first_row", "First", show=False, id="table.first"),
        Binding("G", "last_row", "Last", show=False, id="table.last"),
        Binding("n", "search(1)", "Next match", show=False, id="table.next"),
        Binding("N", "search(-1)", "Prev match", show=False, id="table.prev"),
        Binding("escape", "clear_search", "Clear search", show=False, id="table.clear"),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.search = ""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("search", "clear_search"):
            return bool(self.search)  # False: the key goes on to the view's own binding
        return super().check_action(action, parameters)

    def action_first_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=0)

    def action_last_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1)

    def set_search(self, text: str) -> int | None:
        """Search for ``text`` and move to the first match at or after the cursor; its
        row, or None."""
        self.search = text.strip()
        self.refresh_bindings()
        return self.find(0) if self.search else None

    def action_search(self, step: int) -> None:
        self.find(step)

    def action_clear_search(self) -> None:
        self.search = ""
        self.refresh_bindings()

    def find(self, step: int) -> int | None:
        """Move to the next (1), previous (-1) or current-or-next (0) matching row."""
        count = self.row_count
        if not self.search or not count:
            return None
        start = self.cursor_row
        offsets = range(count) if step == 0 else range(1, count + 1)
        direction = -1 if step < 0 else 1
        for offset in offsets:
            row = (start + direction * offset) % count
            if row_matches(self.get_row_at(row), self.search):
                self.move_cursor(row=row)
                return row
        self.notify(literal.shown(f"no row holds {self.search!r}"), markup=False, timeout=3)
        return None

"""The Fleet view: every server on one screen, one row each (docs/dashboard.md).

It polls nothing: the rows are what the Server view's feeds last sent (``FleetBoard``) and
what the Capture source already lists (per-server capture in flight and rate). The Server
view is started behind it when the dashboard opens here, so its feeds run.
"""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from eagle_tui.tui.render import literal
from eagle_tui.tui.render.fleet import (
    COLUMNS,
    CaptureRates,
    FleetRow,
    row_matches,
    sort_value,
    summary,
)
from eagle_tui.tui.screens.base import ViewScreen
from eagle_tui.tui.widgets.fleet_table import FleetTable
from eagle_tui.tui.widgets.nav_table import SearchableTable

HELP = """\
Every watched server on one row (a router's workers too: with `--trust-router-workers`
each is watched like a server; otherwise shown as the router lists them): its **phase**
(or the router's word for a worker), requests running (**run**) and queued (**que**),
**tok/s** and **KV** cache use from its newest per-batch log line, the accept length
(**acc**) while it speculates, the **GPU** memory its processes hold (GB of the GPUs they
hold it on; `-` for a server on another host), the requests a running capture has in
flight on it (**cap**) and the rows a second it finishes there (**cap/s**), and its most
severe **flag**. The line above sums the fleet.

`o` sorts by the next column (or click a header), `O` reverses: numbers largest first, the
phase down-first, flags by severity. `/` filters: only rows with the text in a cell stay
(`ready`, a host, `stalled`); `Esc` shows every row again. `j`/`k`, `g`/`G` move;
`Enter` opens the server's card and log in the Server view (a router's unwatched worker:
the router's card, which lists it).

Nothing here polls a server: the rows are what the Server view's watchers last saw, redrawn
once per refresh period.
"""


class FleetScreen(ViewScreen):
    """A summary line and the fleet table."""

    VIEW = "fleet"
    HELP_TEXT = HELP
    AUTO_FOCUS = "#fleet-table"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "sort_next", "Sort", id="fleet.sort"),
        Binding("O", "sort_reverse", "Reverse sort", show=False, id="fleet.sort_reverse"),
        Binding("enter", "open_server", "Open card", id="fleet.open"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.sort_column: int | None = None
        self.sort_reverse = False
        self.rates = CaptureRates()

    def compose_body(self) -> ComposeResult:
        yield Static("", id="fleet-summary", markup=False)
        yield FleetTable(id="fleet-table")

    def on_mount(self) -> None:
        self.refresh_fleet()
        self.set_interval(self.eagle.options.refresh_s, self.refresh_fleet)

    @property
    def table(self) -> FleetTable:
        return self.query_one(FleetTable)

    def every_row(self) -> list[FleetRow]:
        """Every server, with the capture columns."""
        control = self.eagle.sources.capture
        batches = control.batches() if control is not None else ()
        return self.eagle.fleet.rows(self.rates.update(self.eagle.clock.monotonic(), batches))

    def shown_rows(self, rows: list[FleetRow]) -> list[FleetRow]:
        """``rows`` filtered by the search text, in the chosen order."""
        wanted = self.table.search
        shown = [row for row in rows if row_matches(row, wanted)] if wanted else list(rows)
        if self.sort_column is not None:
            column = self.sort_column
            shown.sort(key=lambda row: sort_value(row, column), reverse=self.sort_reverse)
        return shown

    def refresh_fleet(self) -> None:
        """Redraw from what the feeds and the capture source last gave."""
        everyone = self.every_row()
        rows = self.shown_rows(everyone)
        text = summary(everyone) if everyone else "no server watched yet"
        if self.table.search:
            text += f" · showing {len(rows)} matching {self.table.search!r} (Esc: all)"
        self.query_one("#fleet-summary", Static).update(literal.content(text))
        self.table.show(rows)

    # -- sorting, filtering, opening ---------------------------------------------------------

    def action_sort_next(self) -> None:
        count = len(COLUMNS)
        self.sort_column = 0 if self.sort_column is None else (self.sort_column + 1) % count
        self._resort()

    def action_sort_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self._resort()

    @on(FleetTable.HeaderClicked)
    def _header_clicked(self, event: FleetTable.HeaderClicked) -> None:
        if self.sort_column == event.column:
            self.sort_reverse = not self.sort_reverse
        self.sort_column = event.column
        self._resort()

    def _resort(self) -> None:
        self.refresh_fleet()
        column = COLUMNS[self.sort_column] if self.sort_column is not None else "watch order"
        order = ", reversed" if self.sort_reverse else ""
        self.notify(literal.shown(f"sorted by {column}{order}"), markup=False, timeout=2)

    def main_widget(self) -> FleetTable:
        return self.table

    def search_table(self, table: SearchableTable, text: str) -> None:
        """``/`` filters this table (rather than jumping to a match)."""
        table.set_search(text)
        self.refresh_fleet()
        self.table.move_cursor(0)

    @on(FleetTable.FilterCleared)
    def _filter_cleared(self) -> None:
        self.refresh_fleet()

    @on(FleetTable.RowClicked)
    def _row_clicked(self) -> None:
        self.action_open_server()

    def action_open_server(self) -> None:
        """The highlighted server's card and log in the Server view."""
        row = self.table.selected_row()
        if row is not None:
            self.eagle.open_server(row.index)

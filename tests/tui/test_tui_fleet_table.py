"""The Fleet table draws a row's line once per content (a redraw costs what changed), and
its keys and clicks do what the Fleet view needs: move, sort by a header, open a row."""

from __future__ import annotations

from dataclasses import replace

from textual.app import App, ComposeResult

from eagle_tui.tui.render.fleet import FleetRow
from eagle_tui.tui.widgets.fleet_table import FleetTable


def rows(count: int) -> list[FleetRow]:
    return [FleetRow(f"http://h{i}:30000", i, f"sim{i:02d}", "ready", "ok", running=float(i),
                     tokens_per_s=100.0 + i) for i in range(count)]


class Board(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.heard: list[str] = []

    def compose(self) -> ComposeResult:
        yield FleetTable(id="table")

    def on_fleet_table_header_clicked(self, message: FleetTable.HeaderClicked) -> None:
        self.heard.append(f"header {message.column}")

    def on_fleet_table_row_clicked(self) -> None:
        table = self.query_one(FleetTable)
        row = table.selected_row()
        self.heard.append(f"row {row.name if row else None}")


async def test_a_redraw_draws_again_only_the_row_that_changed() -> None:
    app = Board()
    async with app.run_test(size=(100, 20)) as pilot:
        table = app.query_one(FleetTable)
        shown = rows(30)
        table.show(shown)
        await pilot.pause()
        before = [table.render_line(y) for y in range(table.size.height)]
        shown[3] = replace(shown[3], tokens_per_s=999.0)
        table.show(shown)
        after = [table.render_line(y) for y in range(table.size.height)]
        changed = [y for y, (a, b) in enumerate(zip(before, after, strict=True)) if a is not b]
        assert changed == [4]  # row 3 is line 4 (the header is line 0), drawn again
        assert "999" in after[4].text and "999" not in before[4].text


async def test_keys_move_the_cursor_and_keep_it_in_view() -> None:
    app = Board()
    async with app.run_test(size=(100, 12)) as pilot:
        table = app.query_one(FleetTable)
        table.show(rows(40))
        table.focus()
        await pilot.press("j", "j", "down", "k")
        assert table.cursor_row == 2
        await pilot.press("G")
        assert table.cursor_row == 39
        assert table.render_line(table.size.height - 1).text.strip().startswith("sim39")
        assert table.render_line(0).text.strip().startswith("server")  # the header stays
        await pilot.press("g")
        assert table.cursor_row == 0 and table.scroll_offset.y == 0


async def test_the_cursor_stays_on_its_server_when_the_order_changes() -> None:
    app = Board()
    async with app.run_test(size=(100, 12)) as pilot:
        table = app.query_one(FleetTable)
        shown = rows(5)
        table.show(shown)
        table.move_cursor(1)
        table.show(list(reversed(shown)))
        await pilot.pause()
        selected = table.selected_row()
        assert selected is not None and selected.name == "sim01" and table.cursor_row == 3


async def test_a_click_on_a_header_sorts_and_on_a_row_opens_it() -> None:
    app = Board()
    async with app.run_test(size=(100, 12)) as pilot:
        table = app.query_one(FleetTable)
        table.show(rows(5))
        await pilot.pause()
        phase_x = table.render_line(0).text.index("phase")
        await pilot.click(FleetTable, offset=(phase_x + 1, 0))
        await pilot.click(FleetTable, offset=(2, 3))
        await pilot.pause()
        assert app.heard == ["header 1", "row sim02"]


async def test_a_wider_cell_widens_its_column_rather_than_cutting_it() -> None:
    app = Board()
    async with app.run_test(size=(120, 12)) as pilot:
        table = app.query_one(FleetTable)
        shown = rows(3)
        table.show(shown)
        shown[1] = replace(shown[1], flag="fatal: CUDA out of memory on rank 3")
        table.show(shown)
        await pilot.pause()
        assert "fatal: CUDA out of memory on rank 3" in table.render_line(2).text

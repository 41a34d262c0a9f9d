"""One keyboard model: Esc leaves any text field, End/G resume follow, bursts of keys keep
their order and field, readable key names, / search with n/N in tables and in the log, and
the log pane's modes (errors, rank folding, wrap, time stamps)."""

from __future__ import annotations

from rich.text import Text
from test_tui_widgets import PaneApp, shown
from textual.binding import Binding
from textual.widgets import Input
from tui_fakes import FakeCapture, FakeServerFeed, batch, health, wait_for
from tui_keys import burst

from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.options import DashboardOptions, ServerTarget
from eagle_tui.tui.render.logview import collapse_ranks, find_line, rank_ranges
from eagle_tui.tui.screens.batch_forms import NewBatchScreen
from eagle_tui.tui.screens.capture import CaptureScreen
from eagle_tui.tui.screens.server import ServerScreen
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.server import LogBatch
from eagle_tui.tui.widgets.log_pane import LogPane, ServerLog
from eagle_tui.tui.widgets.nav_table import NavTable

RANK_LINES = [f"[2026-01-02 03:04:05 TP{r}] Load weight begin. avail mem=139.12 GB"
              for r in range(8)]


def server_app(lines: list[str]) -> EagleApp:
    target = ServerTarget(ServerURL.parse("http://127.0.0.1:30000"), name="kimi")
    feed = FakeServerFeed(target, [health(), LogBatch(tuple(lines))])
    return EagleApp(DashboardOptions(servers=(target,)),
                    sources=Sources(servers=(feed,), capture=FakeCapture()))


async def test_esc_leaves_the_search_box_and_keys_work_again() -> None:
    app = server_app([f"line {i}" for i in range(50)])
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.screen.query_one(LogPane)
        await pilot.press("slash", "a", "b")
        assert isinstance(app.focused, Input)
        await pilot.press("escape")
        assert isinstance(app.focused, ServerLog)
        await pilot.press("f")  # a key of the view again, not a letter in the field
        assert not pane.follow and pane.query_one(Input).value == "ab"


async def test_end_and_G_resume_follow() -> None:
    app = server_app([f"line {i}" for i in range(200)])
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.screen.query_one(LogPane)
        await wait_for(pilot, lambda: pane.server_log.line_count == 200, what="lines")
        for resume in ("end", "G"):
            await pilot.press("k", "k")
            assert not pane.follow
            await pilot.press(resume)
            assert pane.follow, resume
        await pilot.press("g")
        assert not pane.follow and pane.server_log.scroll_y == 0


async def test_a_burst_of_keys_keeps_its_order_and_field() -> None:
    app = EagleApp(DashboardOptions(start_view="capture"), sources=Sources(capture=FakeCapture()))
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("n")
        screen = app.screen
        assert isinstance(screen, NewBatchScreen)
        burst(app, [*"p.jsonl", "tab", *"out", "tab", *"srv", "shift+tab", "end", *"2"])

        def typed() -> tuple[str, str, str]:
            fields = screen.field_values()
            return fields["prompts"], fields["out_dir"], fields["servers"]

        await wait_for(pilot, lambda: typed() == ("p.jsonl", "out2", "srv"),
                       what=lambda: f"the burst in its fields (now {typed()})")
        await pilot.pause()  # the last keys' bubbling too, before the app shuts down


async def test_footer_names_keys_readably() -> None:
    app = server_app([])
    async with app.run_test(size=(120, 30)):
        bindings = [*ServerScreen.BINDINGS, *EagleApp.BINDINGS]
        names = {b.id: app.get_key_display(b) for b in bindings if isinstance(b, Binding)}
        assert names["server.next"] == "]" and names["app.help"] == "?"


async def test_table_search_with_n_and_N_then_esc_gives_n_back() -> None:
    control = FakeCapture([batch("b1-en"), batch("b2-zh"), batch("b3-en"), batch("b4-fr")])
    # No periodic refresh (the slowest --refresh): the table holds still under the keys.
    app = EagleApp(DashboardOptions(start_view="capture", refresh_s=60.0),
                   sources=Sources(capture=control))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, CaptureScreen)
        table = screen.query_one(NavTable)
        await wait_for(pilot, lambda: table.row_count == 4, what="rows")
        await pilot.press("slash")
        await wait_for(pilot, lambda: isinstance(app.focused, Input), what="the search box")
        await pilot.press(*"-en", "enter")
        assert table.search == "-en"
        assert table.cursor_row == 0 and app.focused is table
        await pilot.press("n")
        assert table.cursor_row == 2
        await pilot.press("n")
        assert table.cursor_row == 0  # wraps around
        await pilot.press("N")
        assert table.cursor_row == 2
        await pilot.press("j", "G")
        assert table.cursor_row == 3
        await pilot.press("g")
        assert table.cursor_row == 0
        await pilot.press("escape", "n")  # no search: n is the view's "new batch" again
        assert isinstance(app.screen, NewBatchScreen)


async def test_log_search_highlights_and_jumps_errors_too() -> None:
    app = PaneApp()
    async with app.run_test(size=(80, 10)) as pilot:
        pane = app.query_one(LogPane)
        lines = [f"line {i}" for i in range(40)]
        lines[5] = "ERROR: first failure"
        lines[30] = "RuntimeError: second failure"
        pane.add_lines(lines)
        pane.server_log.focus()
        await pilot.press("slash", *"line 1", "enter")
        assert shown(pane)[0] == "line 1"  # matches only, as the filter did
        await pilot.press("m")
        assert len(shown(pane)) == 40
        await pilot.press("n")
        assert not pane.follow
        text = Text("a line 12 here")
        pane.server_log.severity.highlight(text)
        assert [text.plain[s.start:s.end] for s in text.spans if s.style] == ["line 1"]
        index = pane.jump_to_match(pane.server_log.severity.pattern, 1)
        assert index is not None and shown(pane)[index].startswith("line 1")
        await pilot.press("e")
        assert pane.server_log.scroll_y <= 5 or pane.server_log.scroll_y <= 30


async def test_ranks_fold_and_wrap_and_stamps_toggle() -> None:
    app = PaneApp()
    async with app.run_test(size=(40, 12)) as pilot:
        pane = app.query_one(LogPane)
        pane.add_lines(RANK_LINES[:3])
        pane.add_lines(RANK_LINES[3:])  # the open line gains ranks across batches
        await pilot.pause()
        assert shown(pane) == [
            "[2026-01-02 03:04:05 TP0-7] Load weight begin. avail mem=139.12 GB  (×8 ranks)"
        ]
        pane.server_log.focus()
        await pilot.press("t")
        assert shown(pane)[0].startswith("[TP0-7] Load weight")
        await pilot.press("w")
        assert len(shown(pane)) > 1 and all(len(line) <= 40 for line in shown(pane))
        await pilot.press("w", "c")
        assert len(shown(pane)) == 8


def test_log_view_helpers() -> None:
    assert rank_ranges([0, 1, 2, 5, 6, 9]) == "0-2,5-6,9"
    groups = list(collapse_ranks(["[t TP0] a", "[t TP1] a", "[t TP0] b", "plain"]))
    assert [g.text() for g in groups] == ["[t TP0-1] a  (×2 ranks)", "[t TP0] b", "plain"]
    assert find_line(["a", "b", "a"], __import__("re").compile("a"), 0) == 2
    assert find_line(["a", "b", "a"], __import__("re").compile("a"), 0, backwards=True) == 2

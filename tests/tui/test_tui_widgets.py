"""Widgets that show server and model text: literal rendering, batching, filter, follow."""

from __future__ import annotations

import re

from textual.app import App, ComposeResult
from textual.widgets import Input

from eagle_tui.tui.render.flags import flag_severity
from eagle_tui.tui.render.meter import MeterValue, bar_cells, window_scale
from eagle_tui.tui.widgets.flags import FlagBadges, FlagEvidence
from eagle_tui.tui.widgets.log_pane import (
    LogBuffer,
    LogPane,
    ServerLog,
    compile_filter,
    filter_lines,
)
from eagle_tui.tui.widgets.meter import Meter

STYLES = [
    "../../tui/styles/app.tcss",
    "../../tui/styles/server.tcss",
    "../../tui/styles/inspect.tcss",
]
TRICKY_LINES = ["[INST] hello [/INST]", "a [/] b", "[bold not bold", "ERROR [red]boom[/red]"]


class PaneApp(App[None]):
    CSS_PATH = STYLES  # type: ignore[assignment]

    def compose(self) -> ComposeResult:
        yield LogPane(LogBuffer(capacity=100))


def shown(pane: LogPane) -> list[str]:
    return list(pane.query_one(ServerLog).lines)


async def test_log_lines_are_literal_and_batched() -> None:
    app = PaneApp()
    async with app.run_test(size=(80, 20)) as pilot:
        pane = app.query_one(LogPane)
        pane.add_lines(TRICKY_LINES)
        await pilot.pause()
        assert shown(pane) == TRICKY_LINES
        log = pane.query_one(ServerLog)
        text = "\n".join(log.render_line(y).text for y in range(4))
        for line in TRICKY_LINES:
            assert line in text


async def test_ring_buffer_keeps_the_newest_lines() -> None:
    app = PaneApp()
    async with app.run_test(size=(80, 20)) as pilot:
        pane = app.query_one(LogPane)
        pane.add_lines([f"line {i}" for i in range(250)])
        await pilot.pause()
        assert len(pane.buffer) == 100
        assert shown(pane)[-1] == "line 249"
        assert len(shown(pane)) <= 100


async def test_filter_refeeds_from_the_buffer_and_survives_bad_regex() -> None:
    app = PaneApp()
    async with app.run_test(size=(80, 20)) as pilot:
        pane = app.query_one(LogPane)
        pane.add_lines(["alpha 1", "beta 2", "Alpha 3"])
        pane.query_one(ServerLog).focus()
        await pilot.press("slash")
        await pilot.press(*"alpha", "enter")
        await pilot.pause()
        assert shown(pane) == ["alpha 1", "Alpha 3"]  # smart case: lower case ignores case
        pane.add_lines(["alpha 4", "gamma"])
        await pilot.pause()
        assert shown(pane) == ["alpha 1", "Alpha 3", "alpha 4"]
        pane.query_one(Input).value = "[unclosed"
        pane.apply_filter()
        await pilot.pause()
        assert pane.filter_error
        assert shown(pane) == ["alpha 1", "Alpha 3", "alpha 4"]  # the last good filter stays


async def test_follow_turns_off_on_scroll_up_and_back_on_with_f() -> None:
    app = PaneApp()
    async with app.run_test(size=(80, 12)) as pilot:
        pane = app.query_one(LogPane)
        pane.add_lines([f"line {i}" for i in range(60)])
        await pilot.pause()
        log = pane.query_one(ServerLog)
        assert pane.follow and log.scroll_y == log.max_scroll_y
        log.focus()
        await pilot.press("pageup")
        await pilot.pause()
        assert not pane.follow
        where = log.scroll_y
        pane.add_lines(["more"])
        await pilot.pause()
        assert log.scroll_y == where  # not dragged to the end while reading
        await pilot.press("f")
        await pilot.pause()
        assert pane.follow and log.scroll_y == log.max_scroll_y


async def test_health_poll_lines_hidden_until_h() -> None:
    app = PaneApp()
    async with app.run_test(size=(80, 12)) as pilot:
        pane = app.query_one(LogPane)
        pane.add_lines(['INFO: 127.0.0.1:1 - "GET /health HTTP/1.1" 200 OK', "real line"])
        await pilot.pause()
        assert shown(pane) == ["real line"]
        pane.query_one(ServerLog).focus()
        await pilot.press("h")
        await pilot.pause()
        assert len(shown(pane)) == 2


def test_error_lines_are_recognised() -> None:
    log = ServerLog(max_lines=10)
    from rich.text import Text

    error = Text("RuntimeError: CUDA out of memory")
    log.severity.error_style = log.severity.error_style.__class__(bold=True)
    log.severity.highlight(error)
    assert error.spans
    plain = Text("Decode batch, #running-req: 3")
    log.severity.highlight(plain)
    assert not plain.spans


def test_filter_helpers() -> None:
    assert compile_filter("") is None
    assert compile_filter("abc").flags & re.IGNORECASE
    assert not compile_filter("Abc").flags & re.IGNORECASE
    assert filter_lines(["a", "b"], re.compile("a")) == ["a"]


def test_window_scale_marks_the_window_and_stretches_past_it() -> None:
    fill, mark = window_scale(60.0, 120.0)
    assert fill is not None and mark is not None and fill < mark
    fill, mark = window_scale(300.0, 120.0)
    assert fill is not None and mark is not None and fill > mark
    assert window_scale(None, 120.0) == (None, None)
    assert bar_cells(0.5, 0.8, 10) == (5, 8)


class WidgetsApp(App[None]):
    CSS_PATH = STYLES  # type: ignore[assignment]

    def compose(self) -> ComposeResult:
        yield Meter(MeterValue(0.5, "[bold] half [/]", 0.7))
        yield FlagBadges()
        yield FlagEvidence()


async def test_meter_and_flags_render_literal_text() -> None:
    app = WidgetsApp()
    async with app.run_test(size=(80, 6)) as pilot:
        badges = app.query_one(FlagBadges)
        badges.names = ("fatal:[oom]", "tool_call")
        evidence = app.query_one(FlagEvidence)
        evidence.set_flags([("slow_startup", "elapsed [/] 700 s > window [bold]600 s")])
        await pilot.pause()
        meter_text = app.query_one(Meter).render_line(0).text
        assert "[bold] half [/]" in meter_text and "│" in meter_text
        assert "fatal:[oom]" in badges.render_line(0).text
        assert "elapsed [/] 700 s > window [bold]600 s" in evidence.render_line(0).text


def test_flag_severity() -> None:
    assert flag_severity("fatal:oom") == "error"
    assert flag_severity("slow_startup") == "warning"
    assert flag_severity("tool_call") == "info"


async def test_quiet_mode_hides_unfinished_progress_bars() -> None:
    app = PaneApp()
    async with app.run_test(size=(80, 12)) as pilot:
        pane = app.query_one(LogPane)
        bars = [f"Loading shards: {p:3d}% Completed | {p}/100 [00:01<00:02]" for p in (5, 50)]
        done = "Loading shards: 100% Completed | 100/100 [00:03<00:00]"
        pane.add_lines([*bars, done, "Load weight end."])
        await pilot.pause()
        assert shown(pane) == [done, "Load weight end."]

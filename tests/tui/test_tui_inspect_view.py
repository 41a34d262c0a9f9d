"""Inspect view: paging real shards, filtering, opening a sample decoded, copying its id."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, Select, Static
from tui_fakes import FakeCapture, wait_for
from tui_shards import make_row, synthetic_rows, write_shards

from eagle_tui.core import kimi
from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.options import DashboardOptions
from eagle_tui.tui.screens.inspect import InspectScreen
from eagle_tui.tui.screens.sample import SampleScreen
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.samples import CLEAN, SampleFilter, SampleSource
from eagle_tui.tui.sources.tokenizers import TokenizerCache
from eagle_tui.tui.widgets.token_view import TokenView

TRICKY = "Explain [INST] and [/] and [bold please"


def inspect_app(directory: Path) -> EagleApp:
    return EagleApp(
        DashboardOptions(start_view="inspect", shard_dirs=(directory,)),
        sources=Sources(
            capture=FakeCapture(), tokenizers=TokenizerCache(), shard_dirs=(str(directory),)
        ),
    )


def screen_of(app: EagleApp) -> InspectScreen:
    screen = app.screen
    assert isinstance(screen, InspectScreen)
    return screen


async def test_pages_and_filters_without_loading_everything(tmp_path: Path) -> None:
    directory = write_shards(tmp_path / "batch", synthetic_rows(350))
    app = inspect_app(directory)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.page is not None, what="first page")
        assert screen.page is not None and screen.page.pages == 4 and len(screen.page.rows) == 100
        table = screen.query_one("#inspect-table", DataTable)
        assert table.row_count == 100
        await pilot.press("n")
        await wait_for(pilot, lambda: screen.page is not None and screen.page.page == 1)
        assert screen.page.rows[0].index == 100
        await pilot.press("p")
        await wait_for(pilot, lambda: screen.page is not None and screen.page.page == 0)
        screen.query_one("#inspect-flag", Select).value = "tool_call"
        await wait_for(
            pilot,
            lambda: screen.page is not None and screen.page.filter.flag == "tool_call",
            what="flag filter",
        )
        rows = synthetic_rows(350)
        assert screen.page.matching == sum("tool_call" in row.flags for row in rows)
        assert all("tool_call" in row.flags for row in screen.page.rows)
        screen.query_one("#inspect-finish", Select).value = "length"
        await wait_for(
            pilot,
            lambda: screen.page is not None and screen.page.filter.finish == "length",
            what="finish filter",
        )
        assert all(row.finish_reason == "length" for row in screen.page.rows)


async def test_opens_a_sample_decoded_with_literal_tricky_text(tmp_path: Path) -> None:
    tokenizer = load_tokenizer(bundled_tokenizer_path())
    prompt = tokenizer.render([{"role": "user", "content": TRICKY}])
    body = tokenizer.hf.encode("list[int] = [1, 2]", add_special_tokens=False)
    output = [*body, kimi.THINK_END, *body, kimi.IM_END]
    directory = write_shards(tmp_path / "batch", [make_row(0, prompt, output)])
    app = inspect_app(directory)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.page is not None, what="first page")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SampleScreen), what="sample screen")
        view = app.screen.query_one(TokenView)
        await wait_for(pilot, lambda: view.document.decoded, 60.0, "decoding")
        plain = view.render().plain
        assert TRICKY in plain and "list[int] = [1, 2]" in plain
        assert "‹think›" in plain and "‹/think›" in plain and "‹stop›" in plain
        await pilot.press("t")
        await pilot.pause()
        assert str(kimi.THINK_END) in view.render().plain
        await pilot.press("c")
        await pilot.pause()
        assert app.clipboard == "s00000"
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, InspectScreen)


async def test_copy_id_from_the_table(tmp_path: Path) -> None:
    directory = write_shards(tmp_path / "batch", synthetic_rows(5))
    app = inspect_app(directory)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.page is not None, what="first page")
        await pilot.press("down", "c")
        await pilot.pause()
        assert app.clipboard == "s00001"


async def test_a_bad_path_is_reported_and_the_app_stays_up(tmp_path: Path) -> None:
    app = inspect_app(tmp_path / "missing")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(
            pilot,
            lambda: any("cannot open" in n.message for n in app._notifications),
            what="error toast",
        )
        assert app.is_running
        directory = write_shards(tmp_path / "batch", synthetic_rows(3))
        box = app.screen.query_one("#inspect-path", Input)
        box.value = str(directory)
        box.focus()
        await pilot.press("enter")
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.page is not None, what="page after reopening")
        assert screen.page.matching == 3


def test_sample_source_reads_pages_not_whole_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = write_shards(tmp_path / "batch", synthetic_rows(2000), per_file=500, row_group=50)
    source = SampleSource(directory)
    reads: list[tuple[int, int]] = []
    original = source.reader.page

    def page(start: int, count: int, columns: object = None) -> object:
        reads.append((start, count))
        return original(start, count, columns)  # type: ignore[arg-type]

    monkeypatch.setattr(source.reader, "page", page)
    assert source.page(7, size=100).rows[0].index == 700
    assert reads == [(700, 100)]
    rows = synthetic_rows(2000)
    summary = source.summary()
    assert (
        source.select(SampleFilter(flag=CLEAN))
        == summary.clean
        == sum(not row.flags for row in rows)
    )
    assert summary.flag_counts["tool_call"] == sum("tool_call" in row.flags for row in rows)
    assert summary.finish_counts["length"] == sum(row.finish_reason == "length" for row in rows)


async def test_says_what_an_export_would_keep(tmp_path: Path) -> None:
    rows = synthetic_rows(20)
    rows[4] = make_row(4, rows[4].prompt_ids, rows[4].output_ids, ("aborted",), "abort")
    rows[9] = make_row(9, rows[9].prompt_ids, rows[9].output_ids, ("count_mismatch",))
    rows[11] = make_row(11, rows[11].prompt_ids, rows[11].output_ids, ("count_mismatch",))
    app = inspect_app(write_shards(tmp_path / "batch", rows))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.page is not None, what="first page")
        line = str(screen.query_one("#inspect-export", Static).render())
        assert line == "export would keep 17 of 20 (dropped: count_mismatch 2, aborted 1)"

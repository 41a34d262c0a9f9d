"""Inspect view: paging real shards, filtering, opening a sample decoded, copying its id."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, Select, Static
from tui_fakes import FakeCapture, NotifySpy, batch, wait_for
from tui_shards import make_row, metadata, synthetic_rows, write_shards

from eagle_tui.core import kimi
from eagle_tui.core.samples.select import CLEAN, SampleFilter
from eagle_tui.core.shards.schema import ShardRow
from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.clipboard import ClipboardReach, clipboard_reach, copy_feedback
from eagle_tui.tui.options import DashboardOptions
from eagle_tui.tui.screens.inspect import InspectScreen, PageReady
from eagle_tui.tui.screens.sample import SampleScreen
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.samples import SampleSource
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


async def test_columns_fit_a_page_before_the_table_is_next_idle(tmp_path: Path) -> None:
    """A DataTable measures auto-width columns only when idle and caches cells drawn before
    then at the old width (Textual #3533): under CI load a frame came first and the view kept
    every column at its label's width. The widths must be right when the page is shown."""
    directory = write_shards(tmp_path / "batch", synthetic_rows(350))
    app = inspect_app(directory)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.page is not None, what="first page")
        assert screen.source is not None
        last = screen.source.page(3)  # rows 300-349: a three-digit index column
        screen._page_ready(PageReady(last))  # no await: the table has not been idle since
        table = screen.query_one("#inspect-table", DataTable)
        widest_flags = max(len(" ".join(f"⚑ {flag}" for flag in row.flags) or "clean")
                           for row in last.rows)
        widths = [column.get_render_width(table) - 2 * table.cell_padding
                  for column in table.ordered_columns]
        assert widths[0] == 3 and widths[-1] == max(widest_flags, len("flags")), widths


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
    toasts = NotifySpy(app)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(
            pilot,
            lambda: any("cannot open" in n.message for n in toasts),
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
    [reader] = source.job.readers
    original = reader.page

    def page(start: int, count: int, columns: object = None) -> object:
        reads.append((start, count))
        return original(start, count, columns)  # type: ignore[arg-type]

    monkeypatch.setattr(reader, "page", page)
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


# -- a running batch before its first shard; export and copy ---------------------------------


async def test_a_running_batch_is_spot_checked_before_its_first_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    control = FakeCapture(
        [batch("b1", "running", out_dir=out, tokenizer=bundled_tokenizer_path())]
    )
    control.recent_rows["b1"] = synthetic_rows(12)
    app = EagleApp(
        DashboardOptions(start_view="inspect", shard_dirs=(out,)),
        sources=Sources(capture=control, tokenizers=TokenizerCache(), shard_dirs=(str(out),)),
    )
    monkeypatch.chdir(tmp_path)
    toasts = NotifySpy(app)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.page is not None, what="recent rows")
        summary = str(screen.query_one("#inspect-summary", Static).render())
        assert "12 recent rows from the running worker" in summary
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SampleScreen), what="sample")
        sample = app.screen
        assert isinstance(sample, SampleScreen)
        await wait_for(pilot, lambda: sample.tokens.document.decoded, 60, "decoded")
        await pilot.press("e")
        exported = tmp_path / f"eagle-sample-{sample.view.row.sample_id}.json"
        await wait_for(pilot, exported.exists, what="export")
        data = json.loads(exported.read_text())
        assert data["input_ids"] == list(sample.view.row.input_ids)
        assert data["output_ids"] == list(sample.view.row.output_ids)
        assert data["decoded"]["output"]
        app.clipboard_reach = ClipboardReach("no", "tmux drops it")  # as checked in tmux
        toasts.clear()
        await pilot.press("c")
        toast = next(iter(toasts))
        assert toast.title == "Not copied: the sample id" and "tmux drops it" in toast.message


def test_clipboard_reach_is_honest() -> None:
    assert clipboard_reach({"TERM": "linux"}).reach == "no"
    assert clipboard_reach({"TERM": "screen-256color", "STY": "1.pts"}).reach == "no"
    assert clipboard_reach({"TERM": "xterm-256color"}).reach == "unknown"
    title, message = copy_feedback("the sample id", ClipboardReach("unknown", "no answer"))
    assert title == "Sent the sample id to the clipboard" and "did not" in message


@pytest.mark.slow
async def test_a_real_worker_lists_its_recent_rows_before_any_shard(
    tmp_path: Path, start_sim  # type: ignore[no-untyped-def]
) -> None:
    """GET /recent end to end: the rows a running worker lists are the rows it stores."""
    import asyncio

    from eagle_tui.core.shards.reader import ShardReader
    from eagle_tui.tui.sources.batches import DetachedCapture
    from eagle_tui.tui.sources.capture import BatchRequest

    sim = start_sim("--tokens-per-s", "100")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(
        json.dumps({"id": f"p{i}", "messages": [{"role": "user", "content": f"Q{i}"}]}) + "\n"
        for i in range(24)))
    control = DetachedCapture()
    out = tmp_path / "out"
    batch_id = await asyncio.to_thread(control.start, BatchRequest(
        prompts, out, (sim.url,), bundled_tokenizer_path(), concurrency=4, max_new_tokens=64,
        shard_rows=1000, shard_max_age_s=600.0))
    try:
        rows = []
        for _ in range(300):
            rows = await asyncio.to_thread(control.recent, batch_id)
            if len(rows) >= 3:
                break
            await asyncio.sleep(0.1)
        assert len(rows) >= 3 and not list(out.glob("shards/*.parquet"))  # before any shard
        for _ in range(600):
            if not control.batches()[0].live:
                break
            await asyncio.sleep(0.1)
        stored = {r["sample_id"]: r["input_ids"]
                  for r in ShardReader(out).iter_rows(columns=["sample_id", "input_ids"])}
        for row in rows:
            assert list(row.input_ids) == stored[row.sample_id]
    finally:
        await asyncio.to_thread(control.abort_and_wait, batch_id)
        control.close()


# -- multi-turn batches: a conversation's turns in order -----------------------------------


def conversation_rows() -> list[ShardRow]:
    """Four conversations of three turns, stored as a multi-turn batch stores them: turns of
    different conversations interleaved, and c2's turn 2 before its turn 1."""
    order = [("c0", 0), ("c1", 0), ("c0", 1), ("c2", 0), ("c1", 1), ("c2", 2), ("c0", 2),
             ("c3", 0), ("c2", 1), ("c1", 2), ("c3", 1), ("c3", 2)]
    rows = synthetic_rows(len(order))
    return [replace(row, sample_id=f"{c}#turn{t}", conversation_id=c, turn=t,
                    parent_id=f"{c}#turn{t - 1}" if t else None)
            for row, (c, t) in zip(rows, order, strict=True)]


async def test_v_lists_a_conversation_in_turn_order_and_back(tmp_path: Path) -> None:
    rows = conversation_rows()
    app = inspect_app(write_shards(tmp_path / "batch", rows, per_file=5, row_group=2,
                                   meta=metadata(schema_version=2)))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.page is not None, what="first page")
        assert screen.check_action("conversation", ()) is True
        table = screen.query_one("#inspect-table", DataTable)
        table.move_cursor(row=5)  # c2#turn2
        await pilot.press("v")
        await wait_for(pilot, lambda: screen.page is not None
                       and screen.page.filter.conversation == "c2", what="conversation")
        assert [r.sample_id for r in screen.page.rows] == ["c2#turn0", "c2#turn1", "c2#turn2"]
        summary = str(screen.query_one("#inspect-summary", Static).render())
        assert "conversation c2: 3 turns (v: all rows)" in summary
        screen.query_one("#inspect-flag", Select).value = "truncated"  # within the conversation
        await wait_for(pilot, lambda: screen.page is not None
                       and screen.page.filter.flag == "truncated", what="flag filter")
        assert screen.page.filter.conversation == "c2"
        assert [r.sample_id for r in screen.page.rows] == ["c2#turn0"]
        await pilot.press("v")
        await wait_for(pilot, lambda: screen.page is not None
                       and screen.page.filter.conversation is None, what="all rows")
        truncated = [row.sample_id for row in rows if "truncated" in row.flags]
        assert [r.sample_id for r in screen.page.rows] == truncated == ["c2#turn0", "c3#turn1"]


async def test_v_does_nothing_in_a_single_turn_batch(tmp_path: Path) -> None:
    app = inspect_app(write_shards(tmp_path / "batch", synthetic_rows(10)))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.page is not None, what="first page")
        assert screen.check_action("conversation", ()) is False  # not offered (hidden)
        await pilot.press("v")
        await pilot.pause()
        assert screen.page is not None and screen.page.filter.conversation is None


# -- several batch directories: the --shard slices of one job ------------------------------


def write_slice(directory: Path, rows: list[ShardRow], partition: str) -> Path:
    """A batch directory (manifest and shards, as capture writes them) holding ``rows``."""
    from eagle_tui.core.sampling import SamplingIdentity, SamplingPreset
    from eagle_tui.core.shards.manifest import BatchConfig, Manifest
    from eagle_tui.core.shards.writer import ShardWriter

    config = BatchConfig("/data/p.jsonl", "00", "/models/kimi-k2.5-tiny", "test", "test",
                         SamplingIdentity(64, (SamplingPreset(),)))
    manifest = Manifest(directory, config)
    manifest.extra.partition = partition
    manifest.save_atomic()
    with ShardWriter(directory, metadata=metadata(), manifest=manifest, max_rows=7) as writer:
        for row in rows:
            writer.add(row)
    return directory


async def test_the_slices_of_a_job_open_as_one(tmp_path: Path) -> None:
    rows = synthetic_rows(30)
    first = write_slice(tmp_path / "slice 0", rows[:12], "0/2")  # a space, quoted in the box
    second = write_slice(tmp_path / "slice1", rows[12:], "1/2")
    app = EagleApp(
        DashboardOptions(start_view="inspect", shard_dirs=(first, second)),
        sources=Sources(capture=FakeCapture(), tokenizers=TokenizerCache(),
                        shard_dirs=(str(first), str(second))),
    )
    async with app.run_test(size=(140, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.page is not None, what="first page")
        assert screen.page is not None and screen.page.matching == 30
        summary = str(screen.query_one("#inspect-summary", Static).render())
        assert "30 rows in 5 shards · one job: slices 0, 1 of 2 (all)" in summary
        assert [r.sample_id for r in screen.page.rows] == [r.sample_id for r in rows]
        screen.query_one("#inspect-flag", Select).value = "tool_call"
        await wait_for(pilot, lambda: screen.page is not None
                       and screen.page.filter.flag == "tool_call", what="flag filter")
        assert [r.index for r in screen.page.rows] == [
            i for i, row in enumerate(rows) if "tool_call" in row.flags]
        assert screen.query_one("#inspect-path", Input).value == f"'{first}' {second}"


def test_the_path_box_takes_one_path_or_several(tmp_path: Path) -> None:
    from eagle_tui.tui.screens.inspect import paths_in

    spaced = tmp_path / "a b"
    spaced.mkdir()
    assert paths_in(f" {spaced} ") == [spaced]
    assert paths_in(f"'{spaced}' {tmp_path / 'c'}") == [spaced, tmp_path / "c"]
    assert paths_in("~/x") == [Path("~/x").expanduser()]
    assert paths_in("'unclosed") == [Path("'unclosed")]



async def test_a_tokenizer_other_than_the_recorded_one_is_said(tmp_path: Path) -> None:
    """As `eagle-tui inspect` warns on stderr: these footers record fingerprint "test"."""
    app = inspect_app(write_shards(tmp_path / "batch", synthetic_rows(3)))
    toasts = NotifySpy(app)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.page is not None, what="first page")
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("differs from the one the shards were captured with"
                                          in n.message for n in toasts),
                       60.0, "the warning")


SUMMARY_PROBE = """
import sys
from eagle_tui.tui.sources.samples import SampleSource
source = SampleSource(sys.argv[1])
summary = source.summary()
source.page(0)
print(summary.rows, summary.clean, "pandas" in sys.modules)
"""


@pytest.mark.slow
def test_the_inspect_summary_and_first_page_do_not_import_pandas(tmp_path: Path) -> None:
    """A Python scalar in an Arrow comparison imports pandas (~0.5 s of CPU before the
    Inspect view's first figures); the summary counts without one."""
    import subprocess
    import sys

    rows = synthetic_rows(30)
    directory = write_shards(tmp_path / "batch", rows)
    done = subprocess.run([sys.executable, "-c", SUMMARY_PROBE, str(directory)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    clean = sum(not row.flags for row in rows)
    assert done.stdout.split() == ["30", str(clean), "False"]

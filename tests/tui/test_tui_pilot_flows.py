"""Issue 20, the dashboard's items, through Textual's pilot (the same items are driven on a
real terminal by ``test_tui_pty.py``): bursts of editing keys keep their order (item 2), Esc
in the New-batch form leaves the field (13), Inspect's ``/`` finds a row anywhere in the
batch (8), a sample's copy and export keep its boundary tokens as ``inspect`` prints them
(12), a finished batch's detail is not worded as an error (14), and starting or opening
follows the selection (17)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest
from rich.console import Console
from support.clock import FakeClock
from support.waiting import pilot_wait
from test_tui_capture_view import prompts_file
from textual.pilot import Pilot
from textual.widgets import DataTable, Footer, Input, Static
from tui_fakes import FakeCapture, FakeServerFeed, batch, health
from tui_keys import burst
from tui_shards import make_row, synthetic_rows, write_shards

from eagle_tui.core import kimi
from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.capture.events import RequestEvent
from eagle_tui.core.health.snapshot import Flag
from eagle_tui.core.proc.discover import ServerProcess
from eagle_tui.core.sglang.types import ModelInfo
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.cli import inspect as inspect_cli
from eagle_tui.tui.cli.main import build_parser
from eagle_tui.tui.options import DashboardOptions, ServerTarget
from eagle_tui.tui.render.capture import batch_note
from eagle_tui.tui.render.incidents import HOLD_S
from eagle_tui.tui.screens.batch_forms import NewBatchScreen
from eagle_tui.tui.screens.capture import CaptureScreen
from eagle_tui.tui.screens.help import HelpScreen
from eagle_tui.tui.screens.inspect import InspectScreen
from eagle_tui.tui.screens.sample import SampleScreen, sample_header
from eagle_tui.tui.screens.server import ServerScreen
from eagle_tui.tui.screens.streams import StreamsScreen
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.batches import shard_flag_counts
from eagle_tui.tui.sources.model_info import local_tokenizer_dir
from eagle_tui.tui.sources.server import ServerDiscovery
from eagle_tui.tui.sources.tokenizers import TokenizerCache
from eagle_tui.tui.widgets.field import Field
from eagle_tui.tui.widgets.log_pane import HEALTH_NOISE
from eagle_tui.tui.widgets.server_card import ServerCard

UPSTREAM = Path(__file__).parents[1] / "fixtures" / "upstream" / "textual_input_burst.py"


def upstream_repro() -> ModuleType:
    spec = importlib.util.spec_from_file_location("textual_input_burst", UPSTREAM)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def capture_app(control: FakeCapture, **options: object) -> EagleApp:
    return EagleApp(
        DashboardOptions(start_view="capture", tokenizer=bundled_tokenizer_path(),
                         **options),  # type: ignore[arg-type]
        sources=Sources(capture=control, tokenizers=TokenizerCache()),
    )


async def open_form(app: EagleApp, pilot: Pilot[None]) -> NewBatchScreen:
    """``n`` in the Capture view: the New-batch form."""
    await pilot.press("n")
    await pilot_wait(pilot, lambda: isinstance(app.screen, NewBatchScreen), what="form")
    form = app.screen
    assert isinstance(form, NewBatchScreen)
    return form


# -- item 2: a burst of keys in a text field ------------------------------------------------


async def test_the_upstream_repro_reorders_a_bare_input_and_not_a_field() -> None:
    repro = upstream_repro()
    for keys, expected in repro.BURSTS:
        assert await repro.typed(keys) != expected, "Textual fixed it: drop tui/widgets/field"
        assert await repro.typed(keys, Field) == expected, keys


@pytest.mark.parametrize(("keys", "expected"), [
    (["backspace"] * 4 + list("512"), "512"),
    (["ctrl+u", *"512"], "512"),
    (["home", "9"], "94096"),
    (["left", "left", "backspace", "7", "end", "1"], "47961"),
])
async def test_a_burst_of_editing_keys_in_the_form_keeps_its_order(
    keys: list[str], expected: str
) -> None:
    app = capture_app(FakeCapture())
    async with app.run_test(size=(100, 40)) as pilot:
        form = await open_form(app, pilot)
        field = form.query_one("#form-max_new_tokens", Input)
        field.focus()
        await pilot_wait(pilot, lambda: app.focused is field, what="the field focused")
        burst(app, keys)
        await pilot_wait(pilot, lambda: field.value == expected,
                         what=lambda: f"{expected!r} (now {field.value!r})")


async def test_a_burst_across_fields_edits_each_field_in_place() -> None:
    # ctrl+u belongs to the servers field even though the Tab after it moves the focus on
    # before the field has handled it.
    app = capture_app(FakeCapture(), servers=())
    async with app.run_test(size=(100, 40)) as pilot:
        form = await open_form(app, pilot)
        form.query_one("#form-servers", Input).value = "http://old:1"
        burst(app, [*"p.jsonl", "tab", *"out", "tab", "ctrl+u", *"http://new:2", "tab"])
        wanted = {"prompts": "p.jsonl", "out_dir": "out", "servers": "http://new:2",
                  "tokenizer": str(bundled_tokenizer_path())}

        def typed() -> dict[str, str]:
            return {name: form.field_values()[name] for name in wanted}

        await pilot_wait(pilot, lambda: typed() == wanted, what=lambda: f"{wanted} ({typed()})")


# -- item 13: Esc leaves the form's field ---------------------------------------------------


async def test_esc_in_the_form_leaves_the_field_and_ctrl_g_cancels(tmp_path: Path) -> None:
    app = capture_app(FakeCapture())
    async with app.run_test(size=(100, 40)) as pilot:
        form = await open_form(app, pilot)
        await pilot.press(*"p.jsonl", "tab", *"out")
        await pilot.press("escape")
        await pilot_wait(pilot, lambda: not isinstance(app.focused, Input), what="left")
        assert app.screen is form  # the form stays, with what was typed
        assert "Tab back to the fields" in str(form.query_one("#form-keys", Static).render())
        assert form.field_values()["prompts"] == "p.jsonl"
        assert form.field_values()["out_dir"] == "out"
        await pilot.press("escape")  # nothing to leave: still nothing lost
        assert app.screen is form
        await pilot.press("ctrl+g")
        await pilot_wait(pilot, lambda: isinstance(app.screen, CaptureScreen), what="cancelled")


# -- item 8: Inspect's / searches the whole batch -------------------------------------------


def inspect_app(directory: Path, control: FakeCapture | None = None) -> EagleApp:
    return EagleApp(
        DashboardOptions(start_view="inspect", shard_dirs=(directory,)),
        sources=Sources(capture=control or FakeCapture(), tokenizers=TokenizerCache(),
                        shard_dirs=(str(directory),)),
    )


async def first_page(app: EagleApp, pilot: Pilot[None]) -> InspectScreen:
    """The Inspect view once its first page is read."""
    screen = app.screen
    assert isinstance(screen, InspectScreen)
    await pilot_wait(pilot, lambda: screen.page is not None, what="the first page")
    return screen


async def test_inspect_search_finds_a_row_on_another_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = write_shards(tmp_path / "batch", synthetic_rows(350))
    app = inspect_app(directory)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await first_page(app, pilot)
        table = screen.query_one("#inspect-table", DataTable)

        def highlighted() -> str | None:
            row = screen.highlighted_row()
            return row.sample_id if row is not None else None

        for typed, wanted in (("s00250", "s00250"), ("#301", "s00301"), ("00149", "s00149")):
            burst(app, ["slash", *typed, "enter"])
            await pilot_wait(pilot, lambda w=wanted: highlighted() == w,
                             what=lambda w=wanted: f"{w} highlighted (now {highlighted()})")
            assert app.focused is table
        said: list[str] = []
        monkeypatch.setattr(screen, "notify", lambda message, **_: said.append(message))
        burst(app, ["slash", *"p0150", "enter"])
        await pilot_wait(pilot, lambda: bool(said), what="the answer")
        assert "350" in said[0] and "searched every shard" in said[0]


# -- item 12: copy and export keep the boundary tokens -------------------------------------


async def test_copy_and_export_keep_boundary_tokens_as_inspect_prints_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokenizer = load_tokenizer(bundled_tokenizer_path())
    prompt = tokenizer.render([{"role": "user", "content": "Why?"}])
    assert prompt[-1] == kimi.THINK  # the template's final <think> belongs to the prompt
    words = tokenizer.hf.encode("because", add_special_tokens=False)
    output = [*words, kimi.THINK_END, *words, kimi.IM_END]
    directory = write_shards(tmp_path / "batch", [make_row(0, prompt, output)])
    cli = Console(record=True, width=400, markup=False, highlight=False)
    argv = ["inspect", str(directory), "--index", "0"]
    args = build_parser(argv).parse_args(argv)
    assert inspect_cli.run(args, cli) == 0
    printed = cli.export_text()
    markers = [f"⟦</think> {kimi.THINK_END}⟧", f"⟦<|im_end|> {kimi.IM_END}⟧"]
    assert all(marker in printed for marker in [f"⟦<think> {kimi.THINK}⟧", *markers])
    monkeypatch.chdir(tmp_path)
    app = inspect_app(directory)
    async with app.run_test(size=(120, 40)) as pilot:
        await first_page(app, pilot)
        await pilot.press("enter")
        await pilot_wait(pilot, lambda: isinstance(app.screen, SampleScreen), what="sample")
        await pilot_wait(pilot, lambda: app.screen.tokens.document.decoded, 60, "decoded")
        await pilot.press("y")
        await pilot_wait(pilot, lambda: bool(app.clipboard), what="the copy")
        assert app.clipboard.startswith("because") and all(m in app.clipboard for m in markers)
        assert app.clipboard.index(markers[0]) < app.clipboard.index(markers[1])
        await pilot.press("e")
        exported = tmp_path / "eagle-sample-s00000.json"
        await pilot_wait(pilot, exported.exists, what="the export")
        decoded = json.loads(exported.read_text())["decoded"]
        assert decoded["output"] == app.clipboard
        assert decoded["prompt"].endswith(f"⟦<think> {kimi.THINK}⟧")


# -- item 14: a finished batch's detail -----------------------------------------------------


def test_a_finished_batch_has_a_note_not_an_error_and_flags_from_its_shards(
    tmp_path: Path,
) -> None:
    socket_gone = "no control socket at /x/control.sock: the batch worker is not running"
    assert batch_note(BatchState.DONE, socket_gone).startswith("note: ")
    assert batch_note(BatchState.STOPPED, "stopped by the user") == "note: stopped by the user"
    assert batch_note(BatchState.FAILED, "disk full").startswith("error: ")
    assert batch_note(BatchState.DONE, None) == ""
    rows = synthetic_rows(40)
    directory = write_shards(tmp_path / "batch", rows)
    counts = shard_flag_counts(directory)
    assert counts["tool_call"] == sum("tool_call" in r.flags for r in rows) > 0
    assert counts["truncated"] == sum("truncated" in r.flags for r in rows) > 0
    assert shard_flag_counts(tmp_path / "nothing-here") == {}


# -- item 17: starting and opening follow the selection --------------------------------------


async def inspect_shows(pilot: Pilot[None], app: EagleApp, rows: int, what: str
                        ) -> InspectScreen:
    """Wait for the Inspect view and its first page of ``rows`` rows."""
    await pilot_wait(pilot, lambda: isinstance(app.screen, InspectScreen), what="Inspect")
    inspect = app.screen
    assert isinstance(inspect, InspectScreen)
    await pilot_wait(pilot, lambda: inspect.page is not None and len(inspect.page.rows) == rows,
                     what=what)
    return inspect


async def test_a_started_batch_is_selected_and_i_opens_the_selection_in_inspect(
    tmp_path: Path,
) -> None:
    shards = write_shards(tmp_path / "second", synthetic_rows(30))
    control = FakeCapture([batch("b1-first", "done", out_dir=tmp_path / "first"),
                           batch("b2-second", "done", out_dir=shards)])
    app = capture_app(control)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, CaptureScreen)
        await pilot_wait(pilot, lambda: screen.selected() is not None, what="a batch")
        form = await open_form(app, pilot)
        form.query_one("#form-prompts", Input).value = str(prompts_file(tmp_path / "p.jsonl", 3))
        form.query_one("#form-out_dir", Input).value = str(tmp_path / "third")
        form.query_one("#form-servers", Input).value = "http://127.0.0.1:9"
        await pilot.press("ctrl+s")
        await pilot_wait(pilot, lambda: len(control.started) == 1, 60, "started")

        def selected() -> str | None:
            chosen = screen.selected()
            return chosen.batch_id if chosen is not None else None

        await pilot_wait(pilot, lambda: selected() == "b3-third",
                         what=lambda: f"the new batch selected (now {selected()})")
        await pilot.press("k")
        await pilot_wait(pilot, lambda: selected() == "b2-second", what="the second batch")
        await pilot.press("i")
        inspect = await inspect_shows(pilot, app, 30, "the selected batch's rows")
        assert inspect.query_one("#inspect-path", Input).value == str(shards)


async def test_inspect_with_no_path_opens_the_batch_selected_in_capture(tmp_path: Path) -> None:
    shards = write_shards(tmp_path / "only", synthetic_rows(12))
    app = capture_app(FakeCapture([batch("b1-only", "done", out_dir=shards)]))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, CaptureScreen)
        await pilot_wait(pilot, lambda: screen.selected() is not None, what="the batch")
        await pilot.press("4")
        await inspect_shows(pilot, app, 12, "the batch selected in Capture")
    await asyncio.sleep(0)


# -- Low items ------------------------------------------------------------------------------


def test_our_workers_probe_is_polling_noise_and_think_end_none_reads_as_the_cli() -> None:
    probe = '[2026-12-02 00:58:27] INFO:     127.0.0.1:45704 - "GET /workers HTTP/1.1" 404'
    assert HEALTH_NOISE.search(probe)  # hidden by quiet mode, never the card's "last log"
    assert not HEALTH_NOISE.search('INFO: 127.0.0.1:1 - "POST /generate HTTP/1.1" 200 OK')
    row = replace(make_row(0, [1, 2], [3, 4], finish="length"), think_end=-1)
    assert "think_end at none" in sample_header(row)


async def test_help_says_how_to_close_it() -> None:
    app = capture_app(FakeCapture())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot_wait(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        assert "esc" in str(app.screen.query_one("#help-close", Static).render())
        assert "ctrl+p" in str(app.screen.query_one("#help-palette", Static).render())
        await pilot.press("escape")
        await pilot_wait(pilot, lambda: isinstance(app.screen, CaptureScreen), what="closed")


def found_server(port: int, uid: int | None) -> ServerProcess:
    return ServerProcess(pid=4000 + port, kind="launch_server", cmdline="python -m sglang…",
                         host="127.0.0.1", port=port, log_path=None, create_time=0.0, uid=uid)


async def test_discovery_toasts_only_about_this_users_servers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    theirs, mine = found_server(30001, os.getuid() + 1), found_server(30002, os.getuid())
    targets = ServerDiscovery(lambda: [theirs, mine]).new_targets()
    assert [target.quiet for target in targets] == [True, False]
    crash = Flag("crashed", "process exited with code 1")
    feeds = [FakeServerFeed(target, [health(flags=[crash])]) for target in targets]
    clock = FakeClock()  # the toasts' hold passes when the test says, not in real time
    app = EagleApp(DashboardOptions(servers=tuple(targets)),
                   sources=Sources(servers=tuple(feeds), capture=FakeCapture()), clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        said: list[str] = []
        monkeypatch.setattr(app.screen, "notify", lambda _m, **kw: said.append(kw["title"]))
        screen = app.screen
        assert isinstance(screen, ServerScreen)
        await pilot_wait(pilot, lambda: all(d.incident for d in screen.desks), what="incidents")
        clock.advance(HOLD_S)

        def decided() -> bool:  # each desk has chosen whether to toast its incident
            return all(d.incident is not None and d.incident.shown_rank >= 0
                       for d in screen.desks)

        await pilot_wait(pilot, decided, what="both servers' incidents decided")
        assert said == [f"{targets[1].label}: crashed"]  # listed both; toasted only ours
        assert "(user " in targets[0].label and "(user" not in targets[1].label
        assert len(app.screen.query(ServerCard)) == 2


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_capture_view_fits_its_table_and_footer_keys(size: tuple[int, int]) -> None:
    control = FakeCapture([batch("20260102-030405-ab12", "finished", name="kimi-en"),
                           batch("20260102-041500-cd34", "running", name="kimi-zh")])
    app = capture_app(control)
    async with app.run_test(size=size) as pilot:
        screen = app.screen
        assert isinstance(screen, CaptureScreen)
        table = screen.query_one("#batch-table", DataTable)
        await pilot_wait(pilot, lambda: table.row_count == 2, what="the batches")
        await pilot.pause()
        headers = [str(column.label) for column in table.columns.values()]
        assert {"batch", "name", "state", "done/total", "ETA", "failed", "flagged"} <= set(headers)
        assert table.virtual_size.width <= table.size.width, headers  # nothing cut off
        footer = screen.query_one(Footer)
        assert footer.virtual_size.width <= footer.size.width  # every key whole
        await pilot.press("down")  # the selection survives a narrower terminal
        await pilot.resize_terminal(70, 24)
        await pilot_wait(pilot, lambda: len(table.columns) < len(headers), what="fewer columns")
        chosen = screen.selected()
        assert chosen is not None and chosen.batch_id == "20260102-041500-cd34"
        assert table.virtual_size.width <= table.size.width


@pytest.mark.parametrize(("width", "columns"), [(80, 1), (120, 1), (200, 2), (250, 3)])
async def test_streams_boxes_sit_side_by_side_on_wide_terminals(width: int, columns: int) -> None:
    control = FakeCapture([batch("b1", "running")])
    app = EagleApp(DashboardOptions(start_view="streams"), sources=Sources(capture=control))
    app.watching = "b1"
    async with app.run_test(size=(width, 60)) as pilot:
        screen = app.screen
        assert isinstance(screen, StreamsScreen)
        control.add_events("b1", [RequestEvent(kind="sent", sample_id=f"p{n}", at=0.0,
                                               rid=f"r{n}", watched=True) for n in range(8)])
        await pilot_wait(pilot, lambda: len(screen.slots) == 8, what="eight boxes")
        await pilot.pause()
        rows = {box.region.y for box in screen.slots}
        assert len(rows) == -(-8 // columns)  # 8 boxes, `columns` to a row
        assert all(box.region.width >= 78 for box in screen.slots)  # never squeezed
        assert all(box.region.right <= width for box in screen.slots)


@pytest.mark.parametrize("readonly", [False, True])
async def test_streams_follows_the_running_batch_after_a_restart(readonly: bool) -> None:
    # A dashboard started while batches run: nothing was watched by this one yet.
    control = FakeCapture([batch("b1-old", "done"), batch("b2-night", "running"),
                           batch("b3-later", "stopped")])
    app = EagleApp(DashboardOptions(start_view="capture", readonly=readonly),
                   sources=Sources(capture=control))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("3")
        await pilot_wait(pilot, lambda: isinstance(app.screen, StreamsScreen), what="Streams")
        screen = app.screen
        assert isinstance(screen, StreamsScreen)
        await pilot_wait(pilot, lambda: screen.status_text().startswith("batch b2-night"),
                         what=lambda: f"the running batch followed ({screen.status_text()})")
        asked = [call for call in control.calls if call[0] == "watch"]
        assert asked == ([] if readonly else [("watch", "b2-night", "8")])
        control.add_events("b2-night", [RequestEvent(kind="sent", sample_id="p7", at=0.0,
                                                     rid="r7", watched=True)])
        await pilot_wait(pilot, lambda: "p7" in screen.boxes, what="its stream")


# -- the New-batch form: tokenizer from the server, name, rows per shard --------------------


@pytest.mark.slow
async def test_the_form_prefills_the_tokenizer_the_server_names(
    start_sim: Callable[..., SimProcess],
) -> None:
    sim = start_sim()  # its /model_info names the bundled tokenizer's directory
    target = ServerTarget(ServerURL.parse(sim.url))
    app = EagleApp(DashboardOptions(start_view="capture", servers=(target,)),
                   sources=Sources(servers=(FakeServerFeed(target),), capture=FakeCapture()))
    async with app.run_test(size=(80, 24)) as pilot:
        form = await open_form(app, pilot)
        field = form.query_one("#form-tokenizer", Input)
        await pilot_wait(pilot, lambda: field.value != "", 30, "the tokenizer prefilled")
        assert Path(field.value) == bundled_tokenizer_path()
        note = str(form.query_one("#form-error", Static).render())
        assert f"{sim.url}/model_info" in note


def test_only_a_local_tokenizer_directory_is_prefilled(tmp_path: Path) -> None:
    def info(model: str, tokenizer: str | None = None) -> ModelInfo:
        return ModelInfo(model_path=model, tokenizer_path=tokenizer, served_model_name=None,
                         architectures=(), model_type=None, raw={})

    bundled = bundled_tokenizer_path()
    assert local_tokenizer_dir(info("moonshotai/Kimi-K2.5")) is None  # a Hugging Face id
    assert local_tokenizer_dir(info(str(tmp_path))) is None  # a directory with no tokenizer
    assert local_tokenizer_dir(info(str(tmp_path), str(bundled))) == bundled
    assert local_tokenizer_dir(info(str(bundled), "/elsewhere/tok")) == bundled


async def test_the_form_has_a_name_and_rows_per_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    control = FakeCapture()
    app = capture_app(control)
    monkeypatch.chdir(tmp_path)  # the form's relative p.jsonl and out resolve here
    prompts_file(tmp_path / "p.jsonl", 3)
    async with app.run_test(size=(80, 24)) as pilot:
        form = await open_form(app, pilot)
        assert form.field_values()["shard_rows"] == "2000"
        burst(app, [*"p.jsonl", "tab", "o", "tab", *"http://127.0.0.1:9", "tab", "tab", "tab",
                    "tab", "ctrl+u", *"500", "tab", *"night run"])
        await pilot_wait(pilot, lambda: form.field_values()["name"] == "night run", what="name")
        await pilot.press("ctrl+s")
        await pilot_wait(pilot, lambda: len(control.started) == 1, 60, "started")
        assert (control.started[0].name, control.started[0].shard_rows) == ("night run", 500)

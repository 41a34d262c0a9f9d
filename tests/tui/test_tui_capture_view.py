"""Capture view: batch table and detail, the new-batch form, pause/resume/stop, greying,
and detached batches against the real simulated server: one started from the form, one
started outside the dashboard (as ``capture --detach`` does), paused, killed and resumed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import msgspec
from rich.cells import cell_len
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Input
from tui_fakes import FakeCapture, batch, progress, wait_for

from eagle_tui.core.batches.api import StatusDoc
from eagle_tui.core.batches.detach import launch_detached
from eagle_tui.core.batches.monitor import delta_event, request_event
from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.capture.dispatch import ServerStatus
from eagle_tui.core.capture.events import DeltaEvent, RequestEvent
from eagle_tui.core.capture.progress import Progress
from eagle_tui.core.shards.batchdir.lock import is_held
from eagle_tui.core.tokenizer import bundled_tokenizer_path
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.options import DashboardOptions, ServerTarget
from eagle_tui.tui.render import literal
from eagle_tui.tui.render.capture import kinds_text, sort_key, sparkline
from eagle_tui.tui.screens.batch_forms import NewBatchScreen, StopBatchScreen, stop_question
from eagle_tui.tui.screens.capture import CaptureScreen
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.batches import DetachedCapture, progress_of
from eagle_tui.tui.sources.capture import BatchRequest
from eagle_tui.tui.sources.tokenizers import TokenizerCache
from eagle_tui.tui.widgets.batch_detail import BatchDetail
from eagle_tui.tui.widgets.meter import Meter


def capture_app(control: object, **options: object) -> EagleApp:
    return EagleApp(
        DashboardOptions(start_view="capture", **options),  # type: ignore[arg-type]
        sources=Sources(capture=control, tokenizers=TokenizerCache()),
    )  # type: ignore[arg-type]


def screen_of(app: EagleApp) -> CaptureScreen:
    assert isinstance(app.screen, CaptureScreen)
    return app.screen


def prompts_file(path: Path, count: int) -> Path:
    lines = [
        {"id": f"p{i}", "messages": [{"role": "user", "content": f"Q{i} [INST] [/] [bold"}]}
        for i in range(count)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


async def test_table_and_detail_show_the_batches() -> None:
    control = FakeCapture(
        [
            batch("b1-old", "finished", progress=progress(97, 100, state="finished")),
            batch("b2-live", "running"),
        ]
    )
    app = capture_app(control)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        table = screen.query_one("#batch-table", DataTable)
        await wait_for(pilot, lambda: table.row_count == 2, what="rows")
        row = [str(cell) for cell in table.get_row("b2-live")]
        # settled: done+failed+rejected; the name column came with issue 11
        assert row[:5] == ["b2-live", "—", "running", "43%", "43/100"]
        detail = screen.query_one(BatchDetail)
        assert "b1-old" in str(detail.query_one(".batch-title").render())
        await pilot.press("down")
        await pilot.pause()
        counts = str(detail.query_one(".batch-counts").render())
        assert "done 40" in counts and "in flight 8" in counts
        assert "timeout 2" in str(detail.query_one(".batch-failures").render())
        assert "tool_call 4" in str(detail.query_one(".batch-flags").render())


async def test_columns_fit_names_as_shown_and_grow_with_them() -> None:
    """The table's columns have fixed widths (a DataTable measuring on idle can be drawn at
    the old width first, Textual #3533): measured on the text as shown (an escape in a name
    is drawn visibly, wider than the raw string measures), and widened when a later tick
    brings a wider cell."""
    hostile = "run\x1b]0;pwned\x07"
    control = FakeCapture([batch("b1-live", "running", name=hostile)])
    app = capture_app(control)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = screen_of(app)
        table = screen.query_one("#batch-table", DataTable)
        await wait_for(pilot, lambda: table.row_count == 1, what="rows")

        def name_width() -> int:
            return table.ordered_columns[1].get_render_width(table) - 2 * table.cell_padding

        assert name_width() == cell_len(literal.shown(hostile)) > cell_len(hostile)
        assert str(table.get_row("b1-live")[1]) == literal.shown(hostile)
        control.snapshots[0] = batch("b1-live", "running", name="a-much-longer-batch-name")
        screen.refresh_batches()
        assert name_width() == len("a-much-longer-batch-name")


async def test_no_eta_unless_the_batch_is_progressing() -> None:
    down = (ServerStatus("http://127.0.0.1:30000", "paused", "503", 0, 8, 50, 40, 2),)
    control = FakeCapture([
        batch("b1-paused", "paused"),
        batch("b2-stopping", "stopping"),
        batch("b3-down", "running", progress=progress(servers=down)),
        batch("b4-idle", "running", progress=progress(samples_per_s=0.0)),
        batch("b5-running", "running"),
    ])
    app = capture_app(control)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = screen_of(app)
        table = screen.query_one("#batch-table", DataTable)
        await wait_for(pilot, lambda: table.row_count == 5, what="rows")
        eta = {key.value: str(table.get_row(key)[7]) for key in table.rows}
        assert eta == {"b1-paused": "—", "b2-stopping": "—", "b3-down": "—", "b4-idle": "—",
                       "b5-running": "14s"}
        detail = screen.query_one(BatchDetail)
        meter = detail.query_one(".batch-progress", Meter)
        assert meter.value.label.endswith("no ETA: paused")
        await pilot.press("j", "j")
        await pilot.pause()
        assert meter.value.label.endswith("no ETA: no server ready")


def test_rates_flags_and_stop_question_never_mislead() -> None:
    assert sparkline([0.0, 0.0, 0.0], 3) == "▁▁▁"  # flat at zero, not full height
    assert sparkline([0.0, 2.0, 4.0], 3) == "▁▅█"
    assert kinds_text("flags", {}, 10) == "flags: 10 (by kind: not known yet)"
    assert kinds_text("flags", {}, 0) == "flags: none"
    question = stop_question("b1", 8, 30.0)
    assert "8 in-flight requests finish" in question and "after 30s are aborted" in question
    assert sorted(["10", "9", "—", "1,200"], key=sort_key) == ["9", "10", "1,200", "—"]


async def test_sort_by_column_keeps_the_selection_right() -> None:
    control = FakeCapture([
        batch("b1", "running", name="zeta", progress=progress(90, 100)),
        batch("b2", "running", name="alpha", progress=progress(10, 100)),
    ])
    app = capture_app(control)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = screen_of(app)
        table = screen.query_one("#batch-table", DataTable)
        await wait_for(pilot, lambda: table.row_count == 2, what="rows")
        await pilot.press("o", "o")  # by name
        first = table.coordinate_to_cell_key(Coordinate(0, 0)).row_key.value
        assert first == "b2"
        selected = screen.selected()
        assert selected is not None and selected.batch_id == "b2"
        await pilot.press("O")
        assert table.coordinate_to_cell_key(Coordinate(0, 0)).row_key.value == "b1"


async def test_actions_grey_out_when_they_do_not_apply() -> None:
    control = FakeCapture([batch("b1-done", "finished")])
    app = capture_app(control)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.selected() is not None)
        for action in ("pause_resume", "stop_batch", "watch"):
            assert screen.check_action(action, ()) is None
        assert screen.check_action("new_batch", ()) is True
        control.snapshots = [batch("b1-done", "running")]
        screen.refresh_batches()
        assert screen.check_action("stop_batch", ()) is True


async def test_pause_resume_and_stop_with_confirmation() -> None:
    control = FakeCapture([batch("b1", "running")])
    app = capture_app(control)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.selected() is not None)
        await pilot.press("space")
        assert control.calls[-1] == ("pause", "b1")
        control.snapshots = [batch("b1", "paused")]
        screen.refresh_batches()
        await pilot.press("space")
        assert control.calls[-1] == ("resume", "b1")
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, StopBatchScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert not any(call[0] == "stop" for call in control.calls)
        await pilot.press("s")
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()
        assert control.calls[-1] == ("stop", "b1", "drain")
        await pilot.press("s")
        await pilot.pause()
        await pilot.press("a")
        await pilot.pause()
        assert control.calls[-1] == ("stop", "b1", "abort")


async def test_form_validates_before_starting(tmp_path: Path) -> None:
    control = FakeCapture()
    app = capture_app(control, tokenizer=bundled_tokenizer_path())
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("n")
        await pilot.pause()
        form = app.screen
        assert isinstance(form, NewBatchScreen)
        form.query_one("#form-prompts", Input).value = str(tmp_path / "missing.jsonl")
        form.query_one("#form-out_dir", Input).value = str(tmp_path / "out")
        form.query_one("#form-servers", Input).value = "http://127.0.0.1:30000"
        await pilot.press("ctrl+s")
        error = form.query_one("#form-error")
        await wait_for(pilot, lambda: "missing.jsonl" in str(error.render()), what="error")
        assert control.started == []
        form.query_one("#form-servers", Input).value = "not-a-url"
        form.query_one("#form-prompts", Input).value = str(prompts_file(tmp_path / "p.jsonl", 3))
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "not-a-url" in str(error.render()), what="url error")
        form.query_one("#form-servers", Input).value = "http://127.0.0.1:30000"
        form.query_one("#form-concurrency", Input).value = "0"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "concurrency" in str(error.render()), what="bad number")
        form.query_one("#form-concurrency", Input).value = "4"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: len(control.started) == 1, what="start")
        assert control.started[0].concurrency == 4
        assert isinstance(app.screen, CaptureScreen)


async def test_starts_and_stops_a_real_batch_against_the_sim(tmp_path: Path, sim_server) -> None:  # type: ignore[no-untyped-def]
    control = DetachedCapture()
    target = ServerTarget(ServerURL.parse(sim_server.url), name="sim")
    app = EagleApp(
        DashboardOptions(
            start_view="capture", servers=(target,), tokenizer=bundled_tokenizer_path()
        ),
        sources=Sources(capture=control, tokenizers=TokenizerCache()),
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("n")
        await pilot.pause()
        form = app.screen
        form.query_one("#form-prompts", Input).value = str(prompts_file(tmp_path / "p.jsonl", 30))
        form.query_one("#form-out_dir", Input).value = str(tmp_path / "out")
        form.query_one("#form-max_new_tokens", Input).value = "64"
        form.query_one("#form-servers", Input).value = sim_server.url
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, CaptureScreen), 60, "form closed")
        screen = screen_of(app)
        await wait_for(
            pilot,
            lambda: screen.selected() is not None and screen.selected().state == "done",
            120,
            "batch finished",
        )
        finished = screen.selected()
        assert finished is not None and finished.progress is not None
        assert finished.progress.counts.done == 30
        assert (tmp_path / "out" / "manifest.json").exists()
        assert screen.check_action("stop_batch", ()) is None
    assert Registry().all()[0].final_state == "done"  # the worker recorded how it ended


async def test_lists_a_batch_started_elsewhere_pauses_and_resumes_it_after_a_kill(
    tmp_path: Path,
    start_sim,  # type: ignore[no-untyped-def]
) -> None:
    sim = start_sim("--tokens-per-s", "40")
    request = BatchRequest(
        prompts_file(tmp_path / "p.jsonl", 40),
        tmp_path / "out",
        (sim.url,),
        bundled_tokenizer_path(),
        concurrency=2,
        max_new_tokens=48,
    )
    launched = await asyncio.to_thread(launch_detached, request.to_config())  # as --detach
    batch_id = launched.record.id
    app = capture_app(DetachedCapture())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)

        def state() -> str | None:
            selected = screen.selected()
            return selected.state if selected is not None else None

        await wait_for(pilot, lambda: state() == "running", 30, "the earlier batch, running")
        assert screen.selected().batch_id == batch_id  # type: ignore[union-attr]
        assert screen.check_action("resume_run", ()) is None
        await pilot.press("space")
        await wait_for(pilot, lambda: state() == "paused", 30, "paused")
        await pilot.press("space")
        await wait_for(pilot, lambda: state() == "running", 30, "running again")
        pid = Registry().load(batch_id).pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # the worker dies: the batch is interrupted
        await wait_for(pilot, lambda: state() == "interrupted", 30, "interrupted")
        assert screen.check_action("resume_run", ()) is True
        assert screen.check_action("pause_resume", ()) is None
        await pilot.press("r")
        await wait_for(pilot, lambda: state() == "running", 60, "resumed in a new worker")
        new_pid = Registry().load(batch_id).pid
        assert new_pid not in (None, pid)
        progress = screen.selected().progress  # type: ignore[union-attr]
        assert progress is not None and progress.counts.total == 40
    assert is_held(tmp_path / "out")  # quitting the dashboard leaves the batch running
    assert await asyncio.to_thread(DetachedCapture().abort_and_wait, batch_id)
    assert Registry().load(batch_id).final_state == "stopped"


def test_worker_json_becomes_snapshots_and_stream_events() -> None:
    status = msgspec.json.decode(json.dumps({
        "schema": 1, "at": 0.0, "batch": {"id": "b", "name": "b", "out_dir": "/o"},
        "state": "running", "progress": {},
        "servers": [{"url": "http://h:1", "state": "ready", "reason": "", "in_flight": 3,
                     "limit": 8, "sent": 9, "succeeded": 6, "failed": 0}],
        "flags": {"tool_call": 2},
        "failures": {"timeout": 1},
    }), type=StatusDoc)
    counts = Progress(total=10, done=4, failed=1, settled=5, samples_per_s=2.5, eta_s=None)
    p = progress_of(BatchState.RUNNING, counts, status)
    c = p.counts
    assert (c.total, c.done, c.settled, c.samples_per_s, c.eta_s) == (10, 4, 5, 2.5, None)
    assert p.servers[0].in_flight == 3 and p.flags == {"tool_call": 2}
    watched: set[str] = set()
    assert request_event(RequestEvent(kind="sent", sample_id="a", at=0.0, watched=False),
                         watched) is None
    sent = request_event(RequestEvent(kind="sent", sample_id="b", at=0.0, watched=True,
                                      rid="r"), watched)
    assert sent is not None and sent.kind == "sent" and watched == {"b"}
    done = request_event(RequestEvent(kind="finished", sample_id="b", at=0.0, flags=("f",)),
                         watched)
    assert done is not None and done.flags == ("f",) and watched == set()
    assert sent.watched and done.watched  # a watched request's events reach the Streams view
    d = DeltaEvent(sample_id="b", rid="r", new_ids=(1, 2), total=2, at=1.0)  # kept as it came
    assert (d.kind, d.new_ids, d.total) == ("delta", (1, 2), 2)
    # its ``sent`` lost (a slow reader, a reconnect): the deltas say it is watched, so its end
    # still reaches the Streams view and the box does not stream forever
    late: set[str] = set()
    assert delta_event(DeltaEvent(sample_id="c", rid="r", new_ids=(3,), total=60, at=2.0),
                       late).sample_id == "c"
    ended = request_event(RequestEvent(kind="finished", sample_id="c", at=3.0), late)
    assert ended is not None and ended.watched and late == set()

"""Streams: the board folds watched-request events off the UI thread; the view shows them
coalesced, highlighted, literal; raw-ids toggle; and live streams from a real batch."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tui_fakes import FakeCapture, batch, wait_for

from eagle_tui.core import kimi
from eagle_tui.core.capture.events import CaptureEvent, DeltaEvent, RequestEvent
from eagle_tui.core.tokenizer import bundled_tokenizer_path
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.options import DashboardOptions
from eagle_tui.tui.render.tokens import document_content
from eagle_tui.tui.screens.streams import StreamsScreen
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.batches import DetachedCapture
from eagle_tui.tui.sources.capture import BatchRequest
from eagle_tui.tui.sources.documents import KIMI_BOUNDARIES
from eagle_tui.tui.sources.streams import StreamBoard
from eagle_tui.tui.sources.tokenizers import TokenizerCache
from eagle_tui.tui.widgets.stream_box import StreamBox


def sent(sample_id: str, attempt: int = 1) -> CaptureEvent:
    return RequestEvent(
        kind="sent",
        sample_id=sample_id,
        at=0.0,
        rid=f"r-{sample_id}",
        attempt=attempt,
        watched=True,
        endpoint="http://127.0.0.1:30000",
    )


def delta(sample_id: str, *ids: int) -> CaptureEvent:
    return DeltaEvent(sample_id=sample_id, rid=None, new_ids=ids, total=0,  # 0: unchecked
                      at=0.0)


def finished(sample_id: str) -> CaptureEvent:
    return RequestEvent(kind="finished", sample_id=sample_id, at=0.0, flags=("tool_call",))


def test_board_segments_incrementally_and_reports_only_changes() -> None:
    board = StreamBoard(KIMI_BOUNDARIES)
    views = board.apply([sent("a"), delta("a", 10, 11), sent("b")])
    assert [v.sample_id for v in views] == ["a", "b"]
    assert [p.kind for p in views[0].document.pieces] == ["reasoning"]
    views = board.apply([delta("a", 12, kimi.THINK_END, 20, kimi.IM_END), finished("a")])
    assert [v.sample_id for v in views] == ["a"]
    view = views[0]
    assert view.state == "finished" and view.total_ids == 6 and view.flags == ("tool_call",)
    assert [p.kind for p in view.document.pieces] == ["reasoning", "think_end", "answer", "stop"]
    assert view.document.pieces[0].ids == (10, 11, 12)


def test_board_restarts_a_retried_request() -> None:
    board = StreamBoard(KIMI_BOUNDARIES, keep=2)
    board.apply([sent("a"), delta("a", 1, 2, 3)])
    (view,) = board.apply([sent("a", attempt=2), delta("a", 4)])
    assert view.total_ids == 1 and view.state == "streaming"


def test_board_never_evicts_a_generating_stream() -> None:
    """All slots live: a newer request waits (folded, not shown) and takes the slot of the
    stream that ended first once that one was shown ended, from its first id; beyond
    ``keep`` waiting, newer requests are not shown at all."""
    board = StreamBoard(KIMI_BOUNDARIES, keep=2)
    board.apply([sent("a"), delta("a", 1, 2), sent("b"), delta("b", 5)])
    assert board.apply([sent("c"), delta("c", 7, 8)]) == ()
    assert [v.sample_id for v in board.views()] == ["a", "b"] and board.waiting == 1
    board.apply([sent("d"), sent("e"), delta("e", 1)])  # d waits too; e is skipped
    assert board.skipped == {"e"}
    views = board.apply([finished("b"), delta("a", 3), finished("a"), delta("c", 9)])
    assert [(v.sample_id, v.state) for v in views] == [("b", "finished"), ("a", "finished")]
    views = board.apply([delta("e", 2)])
    assert [(v.sample_id, v.slot, v.total_ids) for v in views] == [("c", 1, 3), ("d", 0, 0)]
    assert [v.sample_id for v in board.views()] == ["d", "c"]


def test_board_counts_ids_it_never_received() -> None:
    board = StreamBoard(KIMI_BOUNDARIES)
    board.apply([sent("a"), DeltaEvent(sample_id="a", rid=None, new_ids=(1, 2), total=2,
                                       at=0.0)])
    (view,) = board.apply([DeltaEvent(sample_id="a", rid=None, new_ids=(9,), total=6, at=0.0)])
    assert view.missed == 3 and view.total_ids == 3
    (view,) = board.apply([RequestEvent(kind="finished", sample_id="a", at=0.0, total=8)])
    assert view.missed == 5 and view.state == "finished"


def test_board_marks_open_streams_end_lost_and_frees_their_slots() -> None:
    board = StreamBoard(KIMI_BOUNDARIES, keep=1)
    board.apply([sent("a"), delta("a", 1, 2), sent("b"), delta("b", 3)])  # b waits
    (view,) = board.end_lost()  # only a is shown
    assert (view.sample_id, view.state, view.ended) == ("a", "end lost", True)
    assert "never reached the dashboard" in view.detail and board.live == 0
    (view,) = board.apply([])  # b takes a's slot, ended too
    assert (view.sample_id, view.state, view.total_ids) == ("b", "end lost", 1)
    assert board.end_lost() == ()
    (view,) = board.apply([sent("b", attempt=2), delta("b", 4)])  # a resumed batch resends
    assert view.state == "streaming" and board.live == 1
    assert board.apply([sent("c")]) == ()  # b keeps its slot while it streams


def test_board_marks_a_stream_streaming_when_tokens_arrive() -> None:
    board = StreamBoard(KIMI_BOUNDARIES)
    (view,) = board.apply([delta("a", 1, 2)])
    assert view.state == "streaming"


def test_board_shows_only_the_tail_of_long_streams() -> None:
    board = StreamBoard(KIMI_BOUNDARIES, tail_ids=100)
    (view,) = board.apply([sent("a"), delta("a", *range(1, 1001))])
    assert view.total_ids == 1000
    assert view.document.total_ids == 100


def streams_app_watching_b1() -> tuple[FakeCapture, EagleApp]:
    """The Streams view watching batch ``b1`` (running, no tokenizer) of a fake control."""
    control = FakeCapture([batch("b1", "running", tokenizer=None)])
    app = EagleApp(
        DashboardOptions(start_view="streams"),
        sources=Sources(capture=control, tokenizers=TokenizerCache()),
    )
    app.watching = "b1"
    return control, app


async def test_view_shows_streams_coalesced_and_toggles_ids() -> None:
    control, app = streams_app_watching_b1()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, StreamsScreen)
        events = [sent("s1"), sent("s2")]
        events += [delta("s1", i) for i in range(1, 500)]
        events += [delta("s1", kimi.THINK_END, 7, kimi.IM_END), finished("s1")]
        control.add_events("b1", events)
        await wait_for(pilot, lambda: len(screen.boxes) == 2, what="two streams")
        await wait_for(
            pilot,
            lambda: screen.boxes["s1"].tokens.document.total_ids == 502,
            what="all tokens of s1",
        )
        box = screen.boxes["s1"]
        assert box.has_class("-done")
        title = box.border_title or ""
        assert "s1" in title and "502 ids" in title and "finished" in title
        await pilot.press("t")
        await pilot.pause()
        view = box.tokens
        assert view.mode == "ids" and f"‹/think›{kimi.THINK_END}" in view.render().plain
        assert control.take_events("b1") == []
        await pilot.press("w")
        assert control.calls[-1] == ("watch", "b1", "8")


async def test_live_streams_from_a_real_batch(tmp_path: Path, start_sim) -> None:  # type: ignore[no-untyped-def]
    sim = start_sim("--tokens-per-s", "300")  # slow enough to watch requests in flight
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "messages": [{"role": "user", "content": f"Q{i} [/]"}]})
            + "\n"
            for i in range(8)
        )
    )
    control = DetachedCapture()
    app = EagleApp(
        DashboardOptions(start_view="streams"),
        sources=Sources(capture=control, tokenizers=TokenizerCache()),
    )
    async with app.run_test(size=(120, 40)) as pilot:
        control.watch("none", 1)  # unknown batch: ignored
        batch_id = await asyncio.to_thread(  # blocking: the worker starts in a second or two
            control.start,
            BatchRequest(
                prompts,
                tmp_path / "out",
                (sim.url,),
                bundled_tokenizer_path(),
                concurrency=2,
                max_new_tokens=512,
            ),
        )
        app.watching = batch_id
        control.watch(batch_id, 4)
        screen = app.screen
        assert isinstance(screen, StreamsScreen)
        await wait_for(pilot, lambda: len(screen.boxes) >= 1, 60, "a live stream")
        def complete(box: StreamBox) -> bool:  # finished with its think end and stop token
            title = str(box.border_title)
            return box.has_class("-done") and "no_think_end" not in title and "trunc" not in title

        await wait_for(
            pilot,
            lambda: any(complete(b) for b in screen.query(StreamBox)),
            60,
            "a finished stream",
        )
        done = next(b for b in screen.query(StreamBox) if complete(b))
        await wait_for(
            pilot,
            lambda: done.tokens.document.decoded,
            60,
            f"decoded ({screen._note})",
        )
        plain = document_content(done.tokens.document, "text", {}).plain  # not just the tail
        assert "‹/think›" in plain and plain.rstrip().endswith("‹stop›")
        await wait_for(pilot, lambda: not control.batches()[0].live, 60, "batch end")


async def test_a_box_whose_end_was_dropped_stops_streaming_once_the_batch_is_over() -> None:
    """A request's ``finished`` event dropped for a slow reader: once the batch has ended and
    its follower has nothing left to give, the box says its end was lost (ci12: boxes kept
    saying "streaming" after the batch was done)."""
    control, app = streams_app_watching_b1()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, StreamsScreen)
        control.add_events("b1", [sent("s1"), delta("s1", 1, 2), sent("s2"), delta("s2", 3),
                                  finished("s2")])
        await wait_for(pilot, lambda: len(screen.boxes) == 2, what="two streams")
        control.followed.add("b1")
        control.snapshots = [batch("b1", "done", tokenizer=None)]
        await asyncio.sleep(3 * screen.flush_s())
        assert screen.boxes["s1"].state == "streaming"  # its events may still come
        control.followed.clear()
        await wait_for(pilot, lambda: screen.boxes["s1"].state == "end lost", what="end lost")
        box = screen.boxes["s1"]
        assert box.has_class("-lost") and "never reached the dashboard" in str(box.border_title)
        assert screen.boxes["s2"].state == "finished"
        await wait_for(pilot, lambda: "0 generating" in screen.status_text(), what="status")

"""Streams that are true: with more watched requests in flight than the board has boxes,
no box switches requests while one generates, and every finished box holds exactly the
output ids the batch stored for that sample."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tui_fakes import wait_for

from eagle_tui.core.batches.control_client import BatchClient
from eagle_tui.core.capture.events import CaptureEvent, DeltaEvent
from eagle_tui.core.shards.reader import ShardReader
from eagle_tui.core.tokenizer import bundled_tokenizer_path
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.options import DashboardOptions
from eagle_tui.tui.screens.streams import StreamsScreen
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.batches import DetachedCapture
from eagle_tui.tui.sources.capture import BatchRequest
from eagle_tui.tui.sources.streams import KEEP_STREAMS, StreamView
from eagle_tui.tui.sources.tokenizers import TokenizerCache
from eagle_tui.tui.widgets.stream_box import StreamBox

pytestmark = pytest.mark.slow

PROMPTS = 36
CONCURRENCY = 12  # more requests generate at once than there are boxes


def write_prompts(path: Path, count: int = PROMPTS) -> Path:
    lines = (
        json.dumps({"id": f"p{i:03d}", "messages": [{"role": "user", "content": f"Q{i}"}]})
        for i in range(count)
    )
    path.write_text("\n".join(lines) + "\n")
    return path


ENDS = ("finished", "failed")


def ids_of(view: StreamView) -> list[int]:
    return [i for piece in view.document.pieces for i in piece.ids]


async def test_every_finished_box_equals_its_stored_row(
    tmp_path: Path, start_sim, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    sim = start_sim("--tokens-per-s", "60")  # the batch lasts long enough to watch it whole
    shown_finished: dict[str, list[int]] = {}
    switched_while_live: list[str] = []
    original_show = StreamBox.show

    def recording_show(box: StreamBox, view: StreamView) -> None:
        if box.sample_id != view.sample_id and not box.ended:
            switched_while_live.append(f"{box.border_title} -> {view.sample_id}")
        if view.state == "finished":
            shown_finished[view.sample_id] = ids_of(view)
        original_show(box, view)

    monkeypatch.setattr(StreamBox, "show", recording_show)
    control = DetachedCapture()
    app = EagleApp(
        DashboardOptions(start_view="streams"),
        sources=Sources(capture=control, tokenizers=TokenizerCache()),
    )
    out = tmp_path / "out"
    async with app.run_test(size=(120, 40)) as pilot:
        batch_id = await asyncio.to_thread(
            control.start,
            BatchRequest(write_prompts(tmp_path / "p.jsonl"), out, (sim.url,),
                         bundled_tokenizer_path(), concurrency=CONCURRENCY,
                         max_new_tokens=160, shard_rows=1000),
        )
        app.watching = batch_id
        control.watch(batch_id, PROMPTS)  # every request streams
        screen = app.screen
        assert isinstance(screen, StreamsScreen)
        await wait_for(pilot, lambda: not control.batches()[0].live, 120, "batch end")

        def where_boxes_stood() -> str:  # a loaded machine delivers the last events late
            live = [box.border_title for box in screen.slots if box.state not in ENDS]
            return f"every box ended; still open: {live}; status: {screen.status_text()}"

        # finished or failed, as the events said: "end lost" would mean events were dropped
        await wait_for(pilot, lambda: all(box.state in ENDS for box in screen.slots), 30,
                       where_boxes_stood)
        assert len(screen.slots) == KEEP_STREAMS
        status = screen.status_text()
        assert "done" in status and "keeping" not in status
    assert switched_while_live == []
    stored = {
        row["sample_id"]: row["input_ids"][row["prompt_len"]:]
        for row in ShardReader(out).iter_rows(columns=["sample_id", "input_ids", "prompt_len"])
    }
    assert len(stored) == PROMPTS
    assert len(shown_finished) >= KEEP_STREAMS
    for sample_id, ids in shown_finished.items():
        assert ids == stored[sample_id], f"box of {sample_id} differs from its stored row"


async def test_a_watch_starts_only_once_its_events_are_subscribed_however_late(
    tmp_path: Path, start_sim, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    """ci47: on a loaded machine the dashboard's subscription to a batch's events came later
    than the 3 s the watch waited for it, so the worker streamed requests nobody was
    subscribed to yet and a finished box lacked its first ids. Every watched request must
    reach the dashboard whole: its ``sent`` first, then deltas adding up to its total."""
    late_s = 4.0  # the subscription is made this late (the old wait gave up after 3 s)
    subscribe = BatchClient.events

    async def late_events(self: BatchClient, **kwargs: float):  # type: ignore[no-untyped-def]
        await asyncio.sleep(late_s)
        async for event in subscribe(self, **kwargs):
            yield event

    monkeypatch.setattr(BatchClient, "events", late_events)
    sim = start_sim("--tokens-per-s", "20")  # each request lasts ~3 s: some start mid-wait
    control = DetachedCapture()
    try:
        batch_id = await asyncio.to_thread(
            control.start,
            BatchRequest(write_prompts(tmp_path / "p.jsonl", 6), tmp_path / "out", (sim.url,),
                         bundled_tokenizer_path(), concurrency=2, max_new_tokens=64),
        )
        control.watch(batch_id, 6)
        events = await take_until_the_batch_ends(control, batch_id)
    finally:
        control.close()
    streamed = {e.sample_id for e in events if isinstance(e, DeltaEvent)}
    assert streamed, "no request was watched"
    for sample_id in sorted(streamed):
        own = [e for e in events if e.sample_id == sample_id]
        assert own[0].kind == "sent", f"{sample_id}: its events begin with {own[0].kind}"
        ids = sum(len(e.new_ids) for e in own if isinstance(e, DeltaEvent))
        assert own[-1].kind == "finished" and own[-1].total == ids, (
            f"{sample_id}: {ids} ids arrived of {own[-1].total}")


async def take_until_the_batch_ends(control: DetachedCapture, batch_id: str,
                                    within_s: float = 90.0) -> list[CaptureEvent]:
    events: list[CaptureEvent] = []
    deadline = asyncio.get_running_loop().time() + within_s
    while asyncio.get_running_loop().time() < deadline:
        events += control.take_events(batch_id)
        batches = control.batches()
        if batches and not batches[0].live and not control.following(batch_id):
            return events + control.take_events(batch_id)
        await asyncio.sleep(0.1)
    raise AssertionError(f"batch {batch_id} still running after {within_s:g} s")

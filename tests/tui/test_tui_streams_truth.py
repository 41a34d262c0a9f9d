"""Streams that are true: with more watched requests in flight than the board has boxes,
no box switches requests while one generates, and every finished box holds exactly the
output ids the batch stored for that sample."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tui_fakes import wait_for

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


def write_prompts(path: Path) -> Path:
    lines = (
        json.dumps({"id": f"p{i:03d}", "messages": [{"role": "user", "content": f"Q{i}"}]})
        for i in range(PROMPTS)
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

"""Per-request acceptance of watched requests: a capture against a simulated speculative
server puts each finished answer's acceptance on its ``finished`` event, the detached
worker's wire keeps it, and the Streams view's box shows it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import msgspec
import pytest

from eagle_tui.core.accept.requests import RequestAcceptance
from eagle_tui.core.capture.config import CaptureConfig, RetryPolicy
from eagle_tui.core.capture.engine import CaptureEngine
from eagle_tui.core.capture.events import CaptureEvent, RequestEvent
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.tokenizer import bundled_tokenizer_path
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.sources.documents import KIMI_BOUNDARIES
from eagle_tui.tui.sources.streams import StreamBoard
from eagle_tui.tui.widgets.stream_box import stream_title

FAST = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0")


def test_the_stream_box_title_shows_a_requests_acceptance() -> None:
    acceptance = RequestAcceptance(completion_tokens=9, verify_steps=2, correct_drafts=6,
                                   proposed_drafts=6, histogram=(0, 0, 0, 2))
    board = StreamBoard(KIMI_BOUNDARIES)
    board.apply([RequestEvent(kind="sent", sample_id="a", at=0.0, rid="r-a", watched=True)])
    view = board.apply([RequestEvent(kind="finished", sample_id="a", at=0.0,
                                     acceptance=acceptance)])[0]
    assert view.acceptance == acceptance
    title = stream_title(view)
    assert "accept 4.50 · rate 1.00 · 2 verify steps · P(>=j) 1.00 1.00 1.00" in title


@pytest.mark.slow
def test_a_watched_capture_carries_each_answers_acceptance(tmp_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"w{i}", "messages": [
        {"role": "user", "content": f"question {i}"}]}) + "\n" for i in range(4)))
    events: list[CaptureEvent] = []
    with SimProcess([*FAST, "--speculative-algorithm", "EAGLE3"]) as sim:
        sim.wait_ready(60)
        config = CaptureConfig(prompts=prompts, out_dir=tmp_path / "out",
                               servers=(ServerURL.parse(sim.url),),
                               tokenizer=bundled_tokenizer_path(), max_new_tokens=96,
                               concurrency=2, health_retry_s=0.05,
                               retry=RetryPolicy(max_attempts=2, base_delay_s=0.0))
        engine = CaptureEngine(config, event_sink=events.append)
        engine.watch(2)
        asyncio.run(engine.run())
    finished = [e for e in events if isinstance(e, RequestEvent) and e.kind == "finished"]
    watched = {e.sample_id for e in events
               if isinstance(e, RequestEvent) and e.kind == "sent" and e.watched}
    assert len(finished) == 4 and len(watched) == 2
    for event in finished:
        acceptance = event.acceptance
        assert acceptance is not None and acceptance.verify_steps > 0
        assert acceptance.completion_tokens == event.total
        assert len(acceptance.per_position) == 3
        wire = msgspec.json.decode(msgspec.json.encode(event), type=RequestEvent)
        assert wire.acceptance == acceptance  # the worker's /events body is this struct

"""Cumulative vs incremental streaming vs non-streaming: the same ids every way."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sim_helpers import RECORDINGS, chat_prompt, sse_chunks

from eagle_tui.core import kimi
from eagle_tui.core.sim.launcher import SimProcess

pytestmark = pytest.mark.slow

SAMPLING = {"max_new_tokens": 4000, "temperature": 0.6, "top_p": 0.95, "sampling_seed": 3}


def stream(url: str, prompt: list[int], **extra: Any) -> list[dict[str, Any]]:
    response = httpx.post(url + "/generate", timeout=30, json={
        "input_ids": prompt, "stream": True, "sampling_params": SAMPLING, **extra})
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    return sse_chunks(response.text)


def test_three_ways_give_identical_output_ids(sim_server: SimProcess, start_sim: Any) -> None:
    incremental = start_sim("--incremental-streaming-output", "--tokens-per-s", "3000")
    cumulative = start_sim("--tokens-per-s", "3000")
    prompts = [chat_prompt(f"modes {i}") for i in range(3)]
    for prompt in prompts:
        plain = httpx.post(sim_server.url + "/generate", timeout=30, json={
            "input_ids": prompt, "sampling_params": SAMPLING}).json()
        deltas = stream(incremental.url, prompt)
        snapshots = stream(cumulative.url, prompt)
        assert len(deltas) > 2 and len(snapshots) > 2  # real streams, not one chunk
        joined = [token for chunk in deltas for token in chunk["output_ids"]]
        assert joined == plain["output_ids"] == snapshots[-1]["output_ids"]
        assert "".join(chunk["text"] for chunk in deltas) == plain["text"]
        # completion_tokens stays cumulative in incremental mode (as recorded)
        counts = [chunk["meta_info"]["completion_tokens"] for chunk in deltas]
        assert counts == sorted(counts) and counts[-1] == len(plain["output_ids"])
        assert deltas[-1]["meta_info"]["finish_reason"] == plain["meta_info"]["finish_reason"]


def test_incremental_chunks_look_like_the_recording(start_sim: Any) -> None:
    sim = start_sim("--incremental-streaming-output", "--tokens-per-s", "3000")
    recorded = [json.loads(line[len("data: "):]) for line in
                (RECORDINGS / "script_model" / "generate_stream_incremental.txt")
                .read_text().split("\n\n") if line.startswith("data: {")]
    for attempt in range(12):
        chunks = stream(sim.url, chat_prompt(f"recorded look {attempt}"))
        if chunks[-1]["meta_info"]["finish_reason"]["type"] == "stop":
            break
    assert list(chunks[0]["meta_info"]) == list(recorded[0]["meta_info"])
    assert list(chunks[1]["meta_info"]) == list(recorded[1]["meta_info"])
    assert list(chunks[-1]["meta_info"]) == list(recorded[-1]["meta_info"])
    # the stop token arrives alone and its text is trimmed, as recorded
    assert chunks[-1]["output_ids"][-1] == kimi.IM_END
    if chunks[-1]["output_ids"] == [kimi.IM_END]:
        assert chunks[-1]["text"] == ""

"""``/generate`` answers: shapes against the recordings, ids, rids, batch, cache, stream."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sim_helpers import chat_prompt, key_shape, recording, sse_chunks

from eagle_tui.core import kimi
from eagle_tui.core.sim.launcher import SimProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(sim_server: SimProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim_server.url, timeout=30) as http:
        yield http


def generate(client: httpx.Client, **body: Any) -> Any:
    response = client.post("/generate", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def greedy(max_new_tokens: int = 48, **extra: Any) -> dict[str, Any]:
    return {"max_new_tokens": max_new_tokens, "temperature": 0, **extra}


def test_non_stream_shape_matches_the_recording(client: httpx.Client) -> None:
    recorded = recording("generate_input_ids.json")
    response = client.post("/generate", json={"input_ids": chat_prompt("shape test"),
                                               "sampling_params": greedy(4)})
    assert response.headers["content-type"] == "application/json"
    assert response.headers["vary"] == "Origin"
    body = response.json()
    assert key_shape(body) == key_shape(recorded["body"])
    assert list(body["meta_info"]) == list(recorded["body"]["meta_info"])


def stopping_prompt(client: httpx.Client, topic: str, *, think: bool = True) -> list[int]:
    """A prompt whose greedy output ends with the stop token (1 in 12 never stops)."""
    for attempt in range(20):
        prompt = chat_prompt(f"{topic} {attempt}", think=think)
        body = generate(client, input_ids=prompt, sampling_params=greedy(4000))
        if body["meta_info"]["finish_reason"]["type"] == "stop":
            return prompt
    raise AssertionError("no prompt stopped on its own")


def test_counts_and_stop_token(client: httpx.Client) -> None:
    prompt = stopping_prompt(client, "counts")
    body = generate(client, input_ids=prompt, sampling_params=greedy(4000))
    meta = body["meta_info"]
    assert meta["completion_tokens"] == len(body["output_ids"])
    assert meta["prompt_tokens"] == len(prompt)
    assert meta["finish_reason"] == {"type": "stop", "matched": kimi.IM_END}
    assert body["output_ids"][-1] == kimi.IM_END
    assert kimi.IM_END not in body["output_ids"][:-1]


def test_some_outputs_run_to_max_new_tokens(client: httpx.Client) -> None:
    kinds = {generate(client, input_ids=chat_prompt(f"runaway {i}"),
                      sampling_params=greedy(4000))["meta_info"]["finish_reason"]["type"]
             for i in range(40)}
    assert kinds == {"stop", "length"}


def test_stop_token_ids_truncate_the_same_output(client: httpx.Client) -> None:
    prompt = chat_prompt("truncate me")
    full = generate(client, input_ids=prompt, sampling_params=greedy(64))["output_ids"]
    stop = full[5]
    cut = generate(client, input_ids=prompt, sampling_params=greedy(64, stop_token_ids=[stop]))
    assert cut["output_ids"] == full[: full.index(stop) + 1]
    assert cut["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}


def test_length_finish_and_default_max_new_tokens(client: httpx.Client) -> None:
    body = generate(client, input_ids=chat_prompt("long"),
                    sampling_params={"temperature": 0, "ignore_eos": True})
    assert body["meta_info"]["finish_reason"] == {"type": "length", "length": 128}
    assert len(body["output_ids"]) == 128


def test_text_trims_the_stop_token_unless_asked(client: httpx.Client) -> None:
    prompt = stopping_prompt(client, "trim", think=False)
    plain = generate(client, input_ids=prompt, sampling_params=greedy(4000))
    assert "<|im_end|>" not in plain["text"]
    kept = generate(client, input_ids=prompt,
                    sampling_params=greedy(4000, skip_special_tokens=False, no_stop_trim=True))
    assert kept["text"].endswith("<|im_end|>")
    assert kept["output_ids"] == plain["output_ids"]


def test_rid_defaults_to_uuid_hex_and_is_echoed(client: httpx.Client) -> None:
    anonymous = generate(client, input_ids=[kimi.IM_USER, 300], sampling_params=greedy(2))
    assert re.fullmatch(r"[0-9a-f]{32}", anonymous["meta_info"]["id"])
    named = generate(client, input_ids=[kimi.IM_USER, 300], rid="cap-000001",
                     sampling_params=greedy(2))
    assert named["meta_info"]["id"] == "cap-000001"


def test_batch_shape_and_rid_expansion(client: httpx.Client) -> None:
    recorded = recording("generate_batch.json")["body"]
    prompts = [chat_prompt("batch one"), chat_prompt("batch two")]
    body = generate(client, input_ids=prompts, rid="B", sampling_params=greedy(4))
    assert isinstance(body, list) and len(body) == 2
    assert [key_shape(item) for item in body] == [key_shape(item) for item in recorded]
    assert [item["meta_info"]["id"] for item in body] == ["B_0", "B_1"]
    assert [item["meta_info"]["prompt_tokens"] for item in body] == [len(p) for p in prompts]
    listed = generate(client, input_ids=prompts, rid=["x-1", "x-2"],
                      sampling_params=[greedy(2), greedy(3)])
    assert [len(item["output_ids"]) for item in listed] == [2, 3]
    assert [item["meta_info"]["id"] for item in listed] == ["x-1", "x-2"]


def test_repeat_prompt_reports_cached_tokens(client: httpx.Client) -> None:
    prompt = chat_prompt("cache me please")
    first = generate(client, input_ids=prompt, sampling_params=greedy(4))["meta_info"]
    again = generate(client, input_ids=prompt, sampling_params=greedy(4))["meta_info"]
    assert first["cached_tokens_details"] is None or first["cached_tokens"] < len(prompt)
    assert again["cached_tokens"] == len(prompt) - 1
    assert again["cached_tokens_details"] == {"device": len(prompt) - 1, "host": 0}


def test_same_prompt_and_seed_give_the_same_ids(client: httpx.Client) -> None:
    prompt = chat_prompt("determinism")
    sampled = {"max_new_tokens": 40, "temperature": 0.7, "top_p": 0.9, "sampling_seed": 7}
    first = generate(client, input_ids=prompt, sampling_params=sampled)
    second = generate(client, input_ids=prompt, sampling_params=sampled)
    other = generate(client, input_ids=prompt, sampling_params={**sampled, "sampling_seed": 8})
    assert first["output_ids"] == second["output_ids"]
    assert other["output_ids"] != first["output_ids"]


def test_stream_and_non_stream_agree(client: httpx.Client) -> None:
    prompt = chat_prompt("stream agreement")
    plain = generate(client, input_ids=prompt, sampling_params=greedy(24))
    response = client.post("/generate", json={"input_ids": prompt, "stream": True,
                                               "sampling_params": greedy(24)})
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    chunks = sse_chunks(response.text)
    assert chunks[-1]["output_ids"] == plain["output_ids"]
    assert chunks[-1]["text"] == plain["text"]
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
    assert chunks[-1]["meta_info"]["finish_reason"] == plain["meta_info"]["finish_reason"]
    assert ["response_sent_to_client_ts" in c["meta_info"] for c in chunks] == \
        [True] + [False] * (len(chunks) - 1)
    assert ["e2e_latency" in c["meta_info"] for c in chunks] == [False] * (len(chunks) - 1) + [True]
    for earlier, later in itertools.pairwise(chunks):  # cumulative
        assert later["output_ids"][: len(earlier["output_ids"])] == earlier["output_ids"]
        assert later["meta_info"]["completion_tokens"] == len(later["output_ids"])


def test_stream_chunk_keys_match_the_recording(client: httpx.Client) -> None:
    recorded = [line[len("data: "):] for line in recording("generate_stream.json")["body"]]
    first, last = json.loads(recorded[0]), json.loads(recorded[-2])
    chunks = sse_chunks(client.post("/generate", json={
        "input_ids": chat_prompt("stream keys"), "stream": True, "sampling_params": greedy(6),
    }).text)
    assert list(chunks[0]["meta_info"]) == list(first["meta_info"])
    assert list(chunks[-1]["meta_info"]) == list(last["meta_info"])


def test_batch_stream_has_an_index_per_chunk(client: httpx.Client) -> None:
    prompts = [chat_prompt("a"), chat_prompt("b")]
    chunks = sse_chunks(client.post("/generate", json={
        "input_ids": prompts, "stream": True, "sampling_params": greedy(5),
    }).text)
    finals = {c["index"]: c for c in chunks if c["meta_info"]["finish_reason"] is not None}
    assert set(finals) == {0, 1}
    assert all(len(finals[i]["output_ids"]) == 5 for i in (0, 1))


def test_text_prompt_is_tokenized(client: httpx.Client) -> None:
    body = generate(client, text="Hello world", sampling_params=greedy(4))
    assert body["meta_info"]["prompt_tokens"] > 0 and len(body["output_ids"]) == 4


def test_logprobs_have_the_recorded_layout(client: httpx.Client) -> None:
    recorded = recording("generate_logprobs.json")["body"]["meta_info"]
    body = generate(client, input_ids=chat_prompt("logprobs"), sampling_params=greedy(3),
                    return_logprob=True, top_logprobs_num=2, logprob_start_len=0)
    meta = body["meta_info"]
    assert list(meta) == list(recorded)
    assert [entry[1] for entry in meta["output_token_logprobs"]] == body["output_ids"]
    assert meta["input_token_logprobs"][0][0] is None
    assert len(meta["output_top_logprobs"][0]) == 2


def test_return_prompt_token_ids(client: httpx.Client) -> None:
    prompt = chat_prompt("echo")
    body = generate(client, input_ids=prompt, sampling_params=greedy(2),
                    return_prompt_token_ids=True)
    assert body["prompt_token_ids"] == prompt

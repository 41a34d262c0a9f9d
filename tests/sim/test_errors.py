"""Every 400 shape of ``/generate``, against the recordings and SGLang's three layers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sim_helpers import key_shape, recording, sse_chunks, sse_payloads

from eagle_tui.core import kimi
from eagle_tui.core.sim.launcher import SimProcess

pytestmark = pytest.mark.slow

PROMPT = [kimi.IM_USER, 1200, 1300, kimi.IM_END, kimi.IM_ASSISTANT, kimi.IM_MIDDLE, kimi.THINK]
CONTEXT = 262144  # the bundled config.json's max_position_embeddings


@pytest.fixture(scope="module")
def client(sim_server: SimProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim_server.url, timeout=30) as http:
        yield http


def post(client: httpx.Client, body: Any = None, *, content: bytes | None = None) -> httpx.Response:
    if content is not None:
        return client.post("/generate", content=content)
    return client.post("/generate", json=body)


@pytest.mark.parametrize("name", ["error_no_input.json", "error_bad_sampling.json"])
def test_recorded_tokenizer_errors_are_reproduced_exactly(client: httpx.Client, name: str) -> None:
    recorded = recording(name)
    response = post(client, recorded["request"]["json"])
    assert response.status_code == recorded["status"] == 400
    assert response.json() == recorded["body"]
    assert response.headers["content-type"] == recorded["headers"]["content-type"]


def test_too_long_prompt_message(client: httpx.Client) -> None:
    response = post(client, {"input_ids": [1200] * (CONTEXT + 10),
                             "sampling_params": {"max_new_tokens": 4}})
    assert response.status_code == 400
    recorded = recording("error_too_long.json")["body"]
    assert key_shape(response.json()) == key_shape(recorded)
    assert response.json()["error"]["message"] == (
        f"The input ({CONTEXT + 10} tokens) is longer than the model's context length "
        f"({CONTEXT} tokens)."
    )


def test_prompt_plus_max_new_tokens_too_long(client: httpx.Client) -> None:
    response = post(client, {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": CONTEXT}})
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(
        f"Requested token count exceeds the model's maximum context length of {CONTEXT} tokens. "
        f"You requested a total of {CONTEXT + len(PROMPT)} tokens: {len(PROMPT)} tokens from "
        f"the input messages and {CONTEXT} tokens for the completion."
    )


@pytest.mark.parametrize(("params", "message"), [
    ({"top_p": 0.0}, "top_p must be in (0, 1], got 0.0."),
    ({"top_k": 0}, "top_k must be at least 1, got 0."),
    ({"min_p": 1.5}, "min_p must be in [0, 1], got 1.5."),
    ({"max_new_tokens": -1}, "max_new_tokens must be at least 0, got -1."),
    ({"max_new_tokens": 4, "min_new_tokens": 8},
     "min_new_tokens must be in [0, max_new_tokens(4)], got 8."),
])
def test_sampling_ranges(client: httpx.Client, params: dict[str, Any], message: str) -> None:
    response = post(client, {"input_ids": PROMPT, "sampling_params": params})
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(message)


def test_empty_input_ids(client: httpx.Client) -> None:
    response = post(client, {"input_ids": []})
    assert response.json() == {"error": {"message": "input_ids cannot be empty."}}


def test_unknown_sampling_key_is_a_plain_string_error(client: httpx.Client) -> None:
    response = post(client, {"input_ids": PROMPT, "sampling_params": {"foo": 1}})
    assert response.status_code == 400
    error = response.json()["error"]
    assert isinstance(error, str)
    assert error.startswith("unknown field `foo`, expected one of `max_new_tokens`, `stop`, ")


@pytest.mark.parametrize(("body", "message"), [
    ({"input_ids": [1, 2.0]}, "invalid type: floating point `2.0`, expected i64"),
    ({"input_ids": PROMPT, "sampling_params": {"max_new_tokens": "5"}},
     'invalid type: string "5", expected i64'),
    ({"input_ids": PROMPT, "stream": "yes"}, 'invalid type: string "yes", expected a boolean'),
    ({"input_ids": PROMPT, "sampling_params": {"temperature": "hot"}},
     'invalid type: string "hot", expected f64'),
])
def test_contract_type_errors(client: httpx.Client, body: dict[str, Any], message: str) -> None:
    response = post(client, body)
    assert response.status_code == 400
    assert response.json() == {"error": message}


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b'{"text": 5}',
                                     b'{"input_ids": "abc"}'])
def test_body_errors_have_the_pydantic_shape(client: httpx.Client, content: bytes) -> None:
    response = post(client, content=content)
    assert response.status_code == 400
    body = response.json()
    assert list(body) == ["object", "message", "type", "param", "code"]
    assert (body["object"], body["type"], body["param"], body["code"]) == \
        ("error", "Bad Request", None, 400)
    assert "validation error" in body["message"]


def test_contract_gate_runs_before_streaming(client: httpx.Client) -> None:
    response = post(client, {"input_ids": PROMPT, "stream": True, "sampling_params": {"x": 1}})
    assert response.status_code == 400 and isinstance(response.json()["error"], str)


def test_tokenizer_errors_are_in_band_when_streaming(client: httpx.Client) -> None:
    response = post(client, {"input_ids": PROMPT, "stream": True,
                             "sampling_params": {"temperature": -1}})
    assert response.status_code == 200
    payloads = sse_payloads(response.text)
    assert payloads[-1] == "[DONE]"
    assert sse_chunks(response.text) == [{"error": {
        "message": "temperature must be a non-negative finite number, got -1.",
        "type": "invalid_request_error", "code": 400, "retryable": False,
    }}]


def test_rid_list_must_match_the_batch(client: httpx.Client) -> None:
    response = post(client, {"input_ids": [PROMPT, PROMPT], "rid": ["only-one"]})
    assert response.json() == {"error": {"message": (
        "The specified rids length mismatch with the batch_size for batch processing.")}}


def test_scheduler_rejects_inputs_beyond_max_req_input_len(start_sim: Any) -> None:
    sim = start_sim("--context-length", "4096")  # max_req_input_len = 4090, as recorded
    with httpx.Client(base_url=sim.url) as client:
        response = post(client, {"input_ids": [1200] * 4092,
                                 "sampling_params": {"max_new_tokens": 1}})
    assert response.status_code == 400
    assert response.json() == {"error": {"message": (
        "Input length (4092 tokens) exceeds the maximum allowed length (4090 tokens). "
        "Use a shorter input or enable --allow-auto-truncate.")}}


def test_unknown_route_is_fastapi_404(client: httpx.Client) -> None:
    response = client.get("/no_such_route")
    assert response.status_code == 404 and response.json() == {"detail": "Not Found"}


def test_errors_are_logged_like_sglang(sim_server: SimProcess, client: httpx.Client) -> None:
    since = sim_server.mark()
    post(client, {"sampling_params": {"max_new_tokens": 4}})
    sim_server.wait_for_line(
        r"^\[[\d\- :]+\] \[http_server\] Error: Either text, input_ids or input_embeds should "
        r"be provided\.$", timeout=10, since=since)
    sim_server.wait_for_line(r'INFO:     127\.0\.0\.1:\d+ - "POST /generate HTTP/1\.1" 400 '
                             r"Bad Request$", timeout=10, since=since)

"""The client against canned answers: every row of SGLang 0.5.23's error table,
and every recorded real-SGLang body (tests/fixtures/realsrv)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from eagle_tui.core import errors
from eagle_tui.core.sglang import GenerateRequest, SamplingParams, SGLangClient, TokenDelta
from eagle_tui.core.urls import ServerURL

FIXTURES = Path(__file__).parent.parent / "fixtures" / "realsrv"
URL = "http://sglang.test"
REQUEST = GenerateRequest(input_ids=[1, 2, 3], sampling=SamplingParams(max_new_tokens=8), rid="r1")

Handler = Callable[[httpx.Request], httpx.Response]


def client_for(handler: Handler, **kwargs: Any) -> SGLangClient:
    return SGLangClient(ServerURL.parse(URL), transport=httpx.MockTransport(handler), **kwargs)


def answer(status: int, body: Any = None, *, raw: bytes | None = None) -> Handler:
    content = raw if raw is not None else json.dumps(body).encode()
    return lambda request: httpx.Response(status, content=content)


def recorded(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def meta(finish: Any, completion_tokens: int, **extra: Any) -> dict[str, Any]:
    return {"id": "r1", "finish_reason": finish, "prompt_tokens": 3,
            "completion_tokens": completion_tokens, **extra}


# -- SGLang 0.5.23's error table, one row per case ------------------------------

ERROR_ROWS = [
    pytest.param(
        400,
        {"object": "error", "message": "1 validation error", "type": "Bad Request",
         "param": None, "code": 400},
        errors.RequestRejected, False, id="pydantic-parse-error",
    ),
    pytest.param(
        400, {"error": "unknown field `foo`, expected one of `max_new_tokens`, `stop`"},
        errors.RequestRejected, False, id="contract-violation-string-error",
    ),
    pytest.param(
        400, recorded("error_bad_sampling.json")["body"],
        errors.RequestRejected, False, id="recorded-bad-sampling",
    ),
    pytest.param(
        400, recorded("error_no_input.json")["body"],
        errors.RequestRejected, False, id="recorded-no-input",
    ),
    pytest.param(
        400, recorded("error_too_long.json")["body"],
        errors.ContextTooLong, False, id="recorded-context-too-long",
    ),
    pytest.param(
        400, {"error": {"message": "Requested token count exceeds the model's maximum context "
                                   "length of 4096 tokens. You requested a total of 5000 tokens"}},
        errors.ContextTooLong, False, id="prompt-plus-max-new-tokens-too-long",
    ),
    pytest.param(
        400, {"error": {"message": "Input length (9000 tokens) exceeds the maximum allowed "
                                   "length (8000 tokens). Use a shorter input"}},
        errors.ContextTooLong, False, id="scheduler-abort-400-max-req-input-len",
    ),
    pytest.param(
        400, {"error": {"message": "Duplicate request ID detected: r1"}},
        errors.DuplicateRequestId, True, id="duplicate-rid",
    ),
    pytest.param(
        503, {"object": "error", "message": "The request queue is full.", "type": "503",
              "param": None, "code": 503},
        errors.ServerBusy, True, id="scheduler-abort-503-queue-full",
    ),
    pytest.param(503, None, errors.ServerBusy, True, id="503-empty-body"),
    pytest.param(
        500, {"object": "error", "message": "multimodal failure", "type": "500",
              "param": None, "code": 500},
        errors.ServerFault, True, id="scheduler-abort-500",
    ),
    pytest.param(401, {"error": "Unauthorized"}, errors.Unauthorized, False, id="auth-401"),
]


@pytest.mark.parametrize(("status", "body", "kind", "retryable"), ERROR_ROWS)
async def test_error_table_row(status: int, body: Any, kind: type, retryable: bool) -> None:
    raw = b"" if body is None else None
    async with client_for(answer(status, body, raw=raw)) as client:
        with pytest.raises(kind) as caught:
            await client.generate(REQUEST)
    assert type(caught.value) is kind
    assert caught.value.retryable is retryable
    assert caught.value.status == status
    assert URL in str(caught.value)


async def test_abort_without_status_is_raised_with_partial_output() -> None:
    body = {"text": "ab", "output_ids": [5, 6],
            "meta_info": meta({"type": "abort", "message": "Aborted", "status_code": None,
                               "err_type": None}, 2)}
    async with client_for(answer(200, body)) as client:
        with pytest.raises(errors.RequestAborted) as caught:
            await client.generate(REQUEST)
    assert caught.value.retryable
    assert caught.value.partial.output_ids == (5, 6)
    assert caught.value.partial.finish.kind == "abort"


async def test_abort_in_waiting_queue_is_raised() -> None:
    body = {"text": "", "output_ids": [],
            "meta_info": meta({"type": "abort", "message": "Abort in waiting queue"}, 0)}
    async with client_for(answer(200, body)) as client:
        with pytest.raises(errors.RequestAborted, match="waiting queue"):
            await client.generate(REQUEST)


# -- transport failures ---------------------------------------------------------

def raising(exc: Exception) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc
    return handler


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (httpx.ConnectError("[Errno 111] Connection refused"), errors.ServerUnreachable),
        (httpx.ConnectTimeout("connect timed out"), errors.ServerTimeout),
        (httpx.ReadTimeout("read timed out"), errors.ServerTimeout),
        (httpx.RemoteProtocolError("Server disconnected without sending a response."),
         errors.ConnectionLost),
        (httpx.ReadError("[Errno 104] Connection reset by peer"), errors.ConnectionLost),
    ],
)
async def test_transport_failures_are_typed_and_transient(exc: Exception, kind: type) -> None:
    async with client_for(raising(exc)) as client:
        with pytest.raises(kind) as caught:
            await client.generate(REQUEST)
    assert caught.value.retryable


async def test_connection_refused_on_a_real_closed_port(unused_tcp_port: int) -> None:
    async with SGLangClient(ServerURL.parse(f"http://127.0.0.1:{unused_tcp_port}")) as client:
        with pytest.raises(errors.ServerUnreachable):
            await client.health()


@pytest.mark.parametrize(
    "raw",
    [b"<html>Bad Gateway</html>", b'{"text": "x"}', b'{"output_ids": [1], "meta_info": {}}',
     b'{"output_ids": ["a"], "meta_info": {"finish_reason": {"type": "stop"}}}',
     b'{"output_ids": [1], "meta_info": {"finish_reason": {"type": "weird"}}}', b"[1, 2]"],
)
async def test_garbage_bodies_are_protocol_errors(raw: bytes) -> None:
    async with client_for(answer(200, raw=raw)) as client:
        with pytest.raises(errors.ProtocolError):
            await client.generate(REQUEST)


@pytest.mark.parametrize("ids", ["[1, true]", "[1, 2.0]", "[1, null]", "[1, [2]]", '"12"', "{}"])
async def test_output_ids_must_be_a_list_of_exact_ints(ids: str) -> None:
    body = {"output_ids": json.loads(ids), "meta_info": {"finish_reason": {"type": "stop"}}}
    raw = json.dumps(body).encode()
    async with client_for(answer(200, raw=raw)) as client:
        with pytest.raises(errors.ProtocolError, match="not a list of integers"):
            await client.generate(REQUEST)


# -- recorded real responses parse -------------------------------------------

@pytest.mark.parametrize(
    "name",
    ["generate_input_ids.json", "generate_stop_token.json", "generate_no_skip_special.json",
     "generate_logprobs.json", "generate_sampled_seed.json", "generate_text.json"],
)
async def test_recorded_bodies_parse(name: str) -> None:
    body = recorded(name)["body"]
    async with client_for(answer(200, body)) as client:
        result = await client.generate(REQUEST)
    assert list(result.output_ids) == body["output_ids"]
    assert result.completion_tokens == len(result.output_ids)
    assert result.prompt_tokens == body["meta_info"]["prompt_tokens"]
    assert result.server_latency_s == body["meta_info"]["e2e_latency"]
    if result.finish.kind == "stop":
        assert result.finish.matched_token == result.output_ids[-1]


async def test_skip_tokenizer_init_body_without_text() -> None:
    body = json.loads((FIXTURES / "generate_skip_tokenizer_init_dummy_weights.json").read_text())
    async with client_for(answer(200, body)) as client:
        result = await client.generate(REQUEST)
    assert result.text is None
    assert result.output_ids == (38, 211, 609, 211, 609, 211, 609, 211)


async def test_old_meta_info_keys_are_tolerated() -> None:
    # 0.5.4-style meta_info: total_retractions, no cached_tokens, no e2e_latency
    body = {"text": "x", "output_ids": [7, 2],
            "meta_info": {"id": "r1", "finish_reason": {"type": "stop", "matched": 2},
                          "prompt_tokens": 3, "completion_tokens": 2, "total_retractions": 0,
                          "some_future_key": {"nested": True}}}
    async with client_for(answer(200, body)) as client:
        result = await client.generate(REQUEST)
    assert result.cached_tokens is None and result.server_latency_s is None
    assert result.meta["some_future_key"] == {"nested": True}


async def test_stop_string_finish_keeps_ids() -> None:
    body = json.loads((FIXTURES / "script_model" / "generate_stop_string.json").read_text())
    async with client_for(answer(200, body)) as client:
        result = await client.generate(REQUEST)
    assert result.finish.matched == "</think>" and result.finish.matched_token is None
    assert result.output_ids[-1] == 1021


# -- streaming --------------------------------------------------------------

def sse(lines: list[str]) -> Handler:
    body = "".join(f"{line}\n\n" for line in lines).encode()
    return lambda request: httpx.Response(
        200, content=body, headers={"content-type": "text/event-stream; charset=utf-8"})


def recorded_stream_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.startswith("data:")]


async def stream_with(handler: Handler) -> tuple[Any, list[TokenDelta]]:
    deltas: list[TokenDelta] = []
    async with client_for(handler) as client:
        result = await client.generate_streaming(REQUEST, deltas.append)
    return result, deltas


async def test_recorded_cumulative_stream() -> None:
    lines = recorded("generate_stream.json")["body"]
    result, deltas = await stream_with(sse(lines))
    assert result.output_ids == (977, 946, 67, 385, 873, 815)
    assert [d.new_ids for d in deltas] == [(977,), (946,), (67,), (385,), (873,), (815,)]
    assert result.finish.kind == "length" and result.finish.length == 6


async def test_recorded_incremental_stream() -> None:
    lines = recorded_stream_lines(FIXTURES / "script_model" / "generate_stream_incremental.txt")
    result, deltas = await stream_with(sse(lines))
    eos = json.loads((FIXTURES / "script_model" / "generate_eos.json").read_text())
    assert list(result.output_ids) == eos["output_ids"]
    assert sum(len(d.new_ids) for d in deltas) == len(eos["output_ids"])
    assert result.finish.matched_token == 2


async def test_recorded_skip_tokenizer_init_stream() -> None:
    lines = recorded_stream_lines(FIXTURES / "generate_stream_skip_tokenizer_init.txt")
    result, _ = await stream_with(sse(lines))
    assert result.output_ids == (38, 211, 609)


def chunk(ids: list[int], total: int | None, finish: Any = None) -> str:
    info: dict[str, Any] = {"id": "r1", "finish_reason": finish}
    if total is not None:
        info["completion_tokens"] = total
    return "data: " + json.dumps({"text": "", "output_ids": ids, "meta_info": info})


@pytest.mark.parametrize("with_counts", [True, False])
async def test_skipped_cumulative_snapshots_and_piled_up_deltas(with_counts: bool) -> None:
    def n(total: int) -> int | None:
        return total if with_counts else None
    done = {"type": "stop", "matched": 9}
    cumulative = [chunk([1], n(1)), chunk([1, 2, 3], n(3)), chunk([1, 2, 3, 4, 9], n(5), done),
                  "data: [DONE]"]
    incremental = [chunk([1], n(1)), chunk([2, 3], n(3)), chunk([4, 9], n(5), done),
                   "data: [DONE]"]
    for lines in (cumulative, incremental):
        result, _ = await stream_with(sse(lines))
        assert result.output_ids == (1, 2, 3, 4, 9)


async def test_in_band_stream_error_is_raised() -> None:
    error = {"error": {"message": "The input (5000 tokens) is longer than the model's context "
                                  "length (4096 tokens).", "type": "invalid_request_error",
                       "code": 400, "retryable": False}}
    with pytest.raises(errors.StreamError) as caught:
        await stream_with(sse(["data: " + json.dumps(error), "data: [DONE]"]))
    assert not caught.value.retryable and caught.value.status == 400


@pytest.mark.parametrize(("status", "kind"), [(400, errors.RequestRejected),
                                              (503, errors.RequestAborted)])
async def test_scheduler_abort_chunk_in_stream(status: int, kind: type) -> None:
    finish = {"type": "abort", "message": "The request queue is full.", "status_code": status,
              "err_type": None}
    with pytest.raises(kind):
        await stream_with(sse([chunk([1], 1), chunk([1], 1, finish), "data: [DONE]"]))


async def test_stream_cut_before_done_is_connection_lost() -> None:
    with pytest.raises(errors.ConnectionLost):
        await stream_with(sse([chunk([1], 1), chunk([1, 2], 2)]))


async def test_contract_gate_400_before_streaming_starts() -> None:
    body = {"error": "unknown field `foo`, expected one of `max_new_tokens`"}
    with pytest.raises(errors.RequestRejected, match="unknown field"):
        await stream_with(answer(400, body))


async def test_cumulative_stream_that_goes_back_is_a_protocol_error() -> None:
    with pytest.raises(errors.ProtocolError):
        await stream_with(sse([chunk([1, 2], 2), chunk([1, 5, 6], 3), "data: [DONE]"]))


# -- health, info, metrics, abort, api key ----------------------------------

async def test_health_statuses_are_answers() -> None:
    for status in (200, 503):
        async with client_for(answer(status, raw=b"")) as client:
            result = await client.health()
        assert result.status == status and result.healthy is (status == 200)
        assert result.latency_s >= 0


async def test_model_info_falls_back_to_the_old_route() -> None:
    body = recorded("model_info.json")["body"]
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path == "/model_info":
            return httpx.Response(404, json={"detail": "Not Found"})
        return httpx.Response(200, json=body)

    async with client_for(handler) as client:
        info = await client.model_info()
    assert seen == ["/model_info", "/get_model_info"]
    assert info.architectures == ("LlamaForCausalLM",) and info.model_type == "llama"


async def test_metrics_absent_and_present() -> None:
    async with client_for(answer(404, {"detail": "Not Found"})) as client:
        assert await client.metrics() is None
    text = ('# HELP x\nsglang:num_running_reqs{tp_rank="0"} 3.0\n'
            'sglang:num_running_reqs{tp_rank="1"} 2.0\nsglang:gen_throughput{a="b"} 41.5\n')
    async with client_for(answer(200, raw=text.encode())) as client:
        metrics = await client.metrics()
    assert metrics == {"sglang:num_running_reqs": 5.0, "sglang:gen_throughput": 41.5}


@pytest.mark.parametrize(("charset", "body", "value"), [
    ("latin-1", "sglang:gen_throughput{m=\"caf\xe9\"} 7.0\n".encode("latin-1"), 7.0),
    ("no-such-charset", b"sglang:gen_throughput 8.0\n", 8.0),  # a hostile header: UTF-8
])
async def test_metrics_text_follows_a_known_charset_and_ignores_an_unknown_one(
    charset: str, body: bytes, value: float
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body,
                              headers={"content-type": f"text/plain; charset={charset}"})

    async with client_for(handler) as client:
        assert await client.metrics() == {"sglang:gen_throughput": value}


async def test_abort_bodies() -> None:
    bodies: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, content=b"")

    async with client_for(handler) as client:
        await client.abort("cap-000001")
        await client.abort_all()
        with pytest.raises(ValueError):
            await client.abort("")
    assert bodies == [{"rid": "cap-000001"}, {"abort_all": True}]


async def test_request_body_is_explicit() -> None:
    sent: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json={"text": "", "output_ids": [2],
                                         "meta_info": meta({"type": "stop", "matched": 2}, 1)})

    request = GenerateRequest(
        input_ids=[5, 6], rid="cap-1",
        sampling=SamplingParams(max_new_tokens=64, temperature=0.6, stop_token_ids=(2,)))
    async with client_for(handler) as client:
        await client.generate(request)
    params = sent[0]["sampling_params"]
    assert sent[0]["input_ids"] == [5, 6] and sent[0]["rid"] == "cap-1"
    assert sent[0]["stream"] is False
    assert params["max_new_tokens"] == 64 and params["stop_token_ids"] == [2]
    assert params["skip_special_tokens"] is False and params["no_stop_trim"] is True


async def test_api_key_is_sent_but_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-very-secret-123"
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization", ""))
        return httpx.Response(401, json={"error": "Unauthorized"})

    monkeypatch.setenv("EAGLE_TUI_API_KEY", secret)
    client = client_for(handler)
    with pytest.raises(errors.Unauthorized) as caught:
        await client.generate(REQUEST)
    await client.aclose()
    assert seen == [f"Bearer {secret}"]
    assert secret not in repr(client) and secret not in str(caught.value)
    assert secret not in repr(caught.value)


# -- straight to the transport: the same request as through httpx's client ----------------

def ok_generate(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"text": "", "output_ids": [2],
                                     "meta_info": meta({"type": "stop", "matched": 2}, 1)})


async def test_straight_to_the_transport_the_request_has_every_header_the_client_adds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[httpx.Request] = []
    monkeypatch.setenv("EAGLE_TUI_API_KEY", "sk-1")
    async with client_for(lambda request: seen.append(request) or ok_generate(request)) as client:
        await client.generate(REQUEST)
        assert (await client.health()).status == 200
    generate, health = seen
    for request in seen:
        assert request.headers["host"] == "sglang.test"
        assert request.headers["authorization"] == "Bearer sk-1"
        assert request.headers["accept-encoding"] == "identity"
        assert request.headers["user-agent"].startswith("python-httpx/")
        assert request.extensions["timeout"]["read"] is not None
    assert generate.headers["content-type"] == "application/json"
    assert int(generate.headers["content-length"]) == len(generate.content)
    assert "content-type" not in health.headers


async def test_user_info_in_the_url_still_becomes_basic_auth() -> None:
    seen: list[httpx.Request] = []
    client = SGLangClient(ServerURL.parse("http://ann:pw@sglang.test"),
                          transport=httpx.MockTransport(lambda r: seen.append(r) or ok_generate(r)))
    async with client:
        await client.generate(REQUEST)
    assert seen[0].headers["authorization"] == "Basic YW5uOnB3"  # base64 of ann:pw


# -- typed decoding: wrong types in named fields are refused, naming the field ----------

@pytest.mark.parametrize(
    ("meta_info", "path"),
    [
        ({"id": 7}, "meta_info.id"),
        ({"prompt_tokens": "12"}, "meta_info.prompt_tokens"),
        ({"completion_tokens": 1.5}, "meta_info.completion_tokens"),
        ({"e2e_latency": "slow"}, "meta_info.e2e_latency"),
        ({"finish_reason": {"type": "stop", "matched": [2]}}, "meta_info.finish_reason.matched"),
        ({"finish_reason": {"type": "weird"}}, "meta_info.finish_reason.type"),
        ({"finish_reason": "stop"}, "meta_info.finish_reason"),
    ],
)
async def test_named_fields_of_the_wrong_type_are_protocol_errors(meta_info: dict[str, Any],
                                                                  path: str) -> None:
    info = {"id": "r1", "finish_reason": {"type": "stop", "matched": 2}, **meta_info}
    body = {"text": "x", "output_ids": [7, 2], "meta_info": info}
    async with client_for(answer(200, body)) as client:
        with pytest.raises(errors.ProtocolError) as caught:
            await client.generate(REQUEST)
    assert caught.value.retryable
    assert f"at {path}" in str(caught.value)


async def test_wrong_types_in_a_stream_chunk_name_the_field() -> None:
    bad = "data: " + json.dumps({"output_ids": [1], "meta_info": {"completion_tokens": "1"}})
    with pytest.raises(errors.ProtocolError, match=r"at meta_info\.completion_tokens"):
        await stream_with(sse([chunk([1], 1), bad, "data: [DONE]"]))
    with pytest.raises(errors.ProtocolError, match=r"not a list of integers.*output_ids\[1\]"):
        await stream_with(sse([chunk([1, True], 2), "data: [DONE]"]))  # type: ignore[list-item]


async def test_unknown_keys_are_ignored_everywhere() -> None:
    body = {"text": "x", "output_ids": [7, 2], "future_top_level": [1, {"a": None}],
            "meta_info": {"id": "r1", "finish_reason": {"type": "stop", "matched": 2,
                                                        "err_type": None, "future": 1},
                          "future_meta": "x"}}
    async with client_for(answer(200, body)) as client:
        result = await client.generate(REQUEST)
    assert result.output_ids == (7, 2) and result.finish.matched_token == 2
    assert result.meta["future_meta"] == "x"


async def test_a_batch_answer_of_several_objects_is_refused() -> None:
    body = recorded("generate_batch.json")["body"]
    assert len(body) == 2
    async with client_for(answer(200, body)) as client:
        with pytest.raises(errors.ProtocolError, match="expected one response object"):
            await client.generate(REQUEST)

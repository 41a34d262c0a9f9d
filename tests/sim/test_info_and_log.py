"""Info routes against the recordings, runtime log lines, /flush_cache and /metrics."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sim_helpers import PREFIX, RUN_DECODE, RUN_PREFILL, chat_prompt, key_shape, recording
from support.waiting import log_contains, wait_until

from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.sim.recorded import RECORDED_SERVER_ARGS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(sim_server: SimProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim_server.url, timeout=30) as http:
        yield http


def test_model_info_matches_the_recorded_shape(client: httpx.Client) -> None:
    body = client.get("/model_info").json()
    recorded = recording("model_info.json")["body"]
    assert key_shape(body) == key_shape(recorded)
    assert body["architectures"] == ["KimiK25ForConditionalGeneration"]
    assert body["model_type"] == "kimi_k25"
    assert body["model_path"].endswith("kimi-k2.5-tiny")


def test_deprecated_aliases_log_a_warning(sim_server: SimProcess, client: httpx.Client) -> None:
    since = sim_server.mark()
    assert client.get("/get_model_info").json() == client.get("/model_info").json()
    assert client.get("/get_server_info").status_code == 200
    for old, new in (("model_info", "model_info"), ("server_info", "server_info")):
        sim_server.wait_for_line(
            rf"Endpoint '/get_{old}' is deprecated and will be removed in a future version\. "
            rf"Please use '/{new}' instead\.", timeout=5, since=since)


def test_server_info_has_sglang_keys(client: httpx.Client) -> None:
    body = client.get("/server_info").json()
    assert list(body)[: len(RECORDED_SERVER_ARGS)] == list(RECORDED_SERVER_ARGS)
    tail = ["launch_command", "status", "max_total_num_tokens", "max_req_input_len",
            "startup_time", "hicache_object_layout", "kv_events", "internal_states", "version",
            "frontend"]
    assert list(body)[len(RECORDED_SERVER_ARGS):] == tail
    assert body["version"] == "0.5.23" and body["tp_size"] == 8
    assert body["max_req_input_len"] == min(262143, body["max_total_num_tokens"] - 1) - 5
    assert body["internal_states"][0]["world_size"] == 8
    assert body["api_key"] is None


def test_v1_models(client: httpx.Client) -> None:
    body = client.get("/v1/models").json()
    assert key_shape(body) == key_shape(recording("v1_models.json")["body"])
    assert body["data"][0]["max_model_len"] == 262144


def test_health_answers_empty_200(client: httpx.Client) -> None:
    response = client.get("/health_generate")
    assert response.status_code == 200 and response.content == b""
    assert "content-type" not in response.headers


def test_flush_cache_text_as_recorded(sim_server: SimProcess, client: httpx.Client) -> None:
    recorded = recording("flush_cache.json")
    since = sim_server.mark()
    response = client.post("/flush_cache")
    assert response.status_code == 200 and response.text == recorded["body"]
    assert "content-type" not in response.headers
    sim_server.wait_for_line(r"Cache flushed successfully!", timeout=5, since=since)
    prompt = chat_prompt("flushed")
    for _ in range(2):
        meta = client.post("/generate", json={"input_ids": prompt,
                                              "sampling_params": {"max_new_tokens": 1}}).json()
    assert meta["meta_info"]["cached_tokens"] == len(prompt) - 1


def test_runtime_lines_parse(sim_server: SimProcess, client: httpx.Client) -> None:
    since = sim_server.mark()
    client.post("/generate", json={"input_ids": [chat_prompt("p1"), chat_prompt("p2")],
                                   "sampling_params": {"max_new_tokens": 2}})
    prefill = sim_server.wait_for_line(RUN_PREFILL, timeout=5, since=since)
    assert prefill.group(1) == "2"
    line = sim_server.wait_for_line(r".*Prefill batch.*", timeout=5, since=since).group(0)
    match = PREFIX.match(line)
    assert match is not None and match.group(2) == " TP0"
    access = sim_server.wait_for_line(
        r'^\[[\d\- :]+\] INFO:     127\.0\.0\.1:\d+ - "POST /generate HTTP/1\.1" 200 OK$',
        timeout=5, since=since)
    assert access


def test_decode_lines_every_40_steps(start_sim: Any) -> None:
    sim = start_sim("--tokens-per-s", "4000")
    httpx.post(sim.url + "/generate", timeout=30, json={
        "input_ids": chat_prompt("decode"), "stream": True,
        "sampling_params": {"max_new_tokens": 130, "ignore_eos": True}})
    decode = [line for line in sim.log_lines() if RUN_DECODE.search(line)]
    assert len(decode) == 3  # steps 40, 80, 120
    assert re.search(r"Decode batch, #running-req: 1, #token: \d+, token usage: \d\.\d\d, "
                     r"cpu graph: False, gen throughput \(token/s\): [\d.]+, #queue-req: 0$",
                     decode[0])


def test_metrics_only_when_enabled(client: httpx.Client, start_sim: Any) -> None:
    assert client.get("/metrics").status_code == 404
    sim = start_sim("--enable-metrics")
    httpx.post(sim.url + "/generate", json={"input_ids": chat_prompt("metrics"),
                                            "sampling_params": {"max_new_tokens": 3}})
    response = httpx.get(sim.url + "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    for series in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput",
                   "sglang:token_usage", "sglang:cache_hit_rate", "sglang:prompt_tokens_total",
                   "sglang:generation_tokens_total", "sglang:num_requests_total",
                   "sglang:time_to_first_token_seconds_bucket",
                   "sglang:e2e_request_latency_seconds_count"):
        assert re.search(rf"^{series}\{{.*tp_rank=\"0\".*\}} [\d.e+-]+$", text, re.MULTILINE), \
            series
    assert re.search(r"^sglang:num_requests_total\{.*\} 2\.0$", text, re.MULTILINE)  # + warm-up


def test_log_file_served_name_and_single_rank(start_sim: Any, tmp_path: Any) -> None:
    log_file = tmp_path / "server.log"
    sim = start_sim("--log-file", str(log_file), "--served-model-name", "kimi-k2.5",
                    "--tp-size", "1", wait=None)
    wait_until(log_contains(log_file, "fired up"), 60, lambda: f"ready in {log_file}",
               every=0.02, unless=lambda: None if sim.returncode is None else sim.log_text())
    assert httpx.get(sim.url + "/v1/models").json()["data"][0]["id"] == "kimi-k2.5"
    assert httpx.get(sim.url + "/model_info").json()["served_model_name"] == "kimi-k2.5"
    written = log_file.read_text()
    assert "The server is fired up and ready to roll!" in written
    assert "fired up" not in sim.log_text()  # stdout stays quiet with --log-file
    weight_lines = [line for line in re.split(r"[\r\n]", written) if "Load weight begin" in line]
    assert len(weight_lines) == 1 and PREFIX.match(weight_lines[0]).group(2) == ""  # type: ignore[union-attr]

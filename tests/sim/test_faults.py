"""Every fault flag does what it says, and leaves SGLang's evidence in the log."""

from __future__ import annotations

import re
import socket
import threading
from typing import Any

import httpx
import pytest
from sim_helpers import FATAL_PATTERNS, PHASE_PATTERNS, PREFIX, RECORDINGS, chat_prompt

from eagle_tui.core.sim.launcher import SimProcess

pytestmark = pytest.mark.slow

GENERATE = {"input_ids": chat_prompt("fault"), "sampling_params": {"max_new_tokens": 8}}


def logged(sim: SimProcess, *names: str) -> None:
    text = sim.log_text()
    for name in names:
        pattern = FATAL_PATTERNS.get(name) or PHASE_PATTERNS[name]
        assert re.search(pattern, text, re.MULTILINE), f"{name} not in log:\n{text[-1500:]}"


@pytest.mark.parametrize(("phase", "evidence"), [
    ("launching", ("TRACEBACK",)),
    ("loading_weights", ("SCHED_EXC", "SIGQUIT_CHILD", "RANK_DIED", "WEIGHT_BEG")),
    ("allocating_kv", ("SCHED_EXC", "NOT_ENOUGH_MEM", "RANK_DIED")),
    ("capturing_graphs", ("SCHED_EXC", "GRAPH_FAIL", "RANK_DIED")),
    ("warming_up", ("UV_BIND", "INIT_FAIL")),
])
def test_crash_at_phase(start_sim: Any, phase: str, evidence: tuple[str, ...]) -> None:
    sim = start_sim("--crash-at", phase, wait=None)
    assert sim.wait_exit(timeout=30) != 0
    logged(sim, *evidence)
    assert "fired up and ready" not in sim.log_text()


def test_stall_while_loading_keeps_the_port_closed(start_sim: Any) -> None:
    sim = start_sim("--stall-at", "loading_weights", wait=None)
    sim.wait_for_line(PHASE_PATTERNS["WEIGHT_BEG"], timeout=30)
    with pytest.raises(TimeoutError):
        sim.wait_for_line(PHASE_PATTERNS["WEIGHT_END"], timeout=1.0)
    assert sim.returncode is None
    with pytest.raises(httpx.ConnectError):
        httpx.get(sim.url + "/health")
    shards = [int(m.group(3)) for line in sim.log_lines()
              if (m := re.match(PHASE_PATTERNS["SHARDS"], line))]
    assert 0 < shards[-1] < 64


def test_stall_while_warming_up_keeps_health_at_503(start_sim: Any) -> None:
    sim = start_sim("--stall-at", "warming_up", wait="bound")
    with pytest.raises(TimeoutError):
        sim.wait_ready(timeout=1.0)
    assert httpx.get(sim.url + "/health").status_code == 503
    assert httpx.get(sim.url + "/model_info").status_code == 200


@pytest.mark.parametrize(("kind", "evidence"), [
    ("oom", ("CUDA_OOM", "GRAPH_FAIL", "RANK_DIED", "SIGQUIT_CHILD")),
    ("nccl", ("NCCL", "SCHED_EXC", "RANK_DIED")),
    ("rank-died", ("RANK_DIED",)),
    ("address-in-use", ("ADDR_IN_USE", "WEIGHT_END")),
])
def test_fatal_kinds(start_sim: Any, kind: str, evidence: tuple[str, ...]) -> None:
    sim = start_sim("--fatal", kind, wait=None)
    assert sim.wait_exit(timeout=30) != 0
    logged(sim, *evidence)
    if kind == "rank-died":
        assert "(exit code: -9)" in sim.log_text()


def test_a_port_held_by_another_process_fails_only_after_loading() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with SimProcess(["--time-scale", "0"], port=port) as sim:
            assert sim.wait_exit(timeout=30) == 3  # uvicorn's STARTUP_FAILURE
            logged(sim, "WEIGHT_END", "GRAPH_END", "ADDR_IN_USE")


def test_error_rate_answers_5xx_with_sglang_shape(start_sim: Any) -> None:
    sim = start_sim("--error-rate", "1", "--fault-seed", "1")
    statuses = set()
    for _ in range(8):
        response = httpx.post(sim.url + "/generate", json=GENERATE)
        body = response.json()
        statuses.add(response.status_code)
        assert list(body) == ["object", "message", "type", "param", "code"]
        assert body["code"] == response.status_code and body["type"] == str(response.status_code)
    assert statuses <= {500, 503} and 503 in statuses
    streamed = httpx.post(sim.url + "/generate", json={**GENERATE, "stream": True})
    assert streamed.status_code == 200
    assert '"type":"abort"' in streamed.text and streamed.text.endswith("data: [DONE]\n\n")


def test_reset_rate_closes_without_a_response(start_sim: Any) -> None:
    sim = start_sim("--reset-rate", "1")
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.post(sim.url + "/generate", json=GENERATE)
    assert httpx.get(sim.url + "/health").status_code == 200  # only that request died


def test_garbage_rate_answers_200_with_junk(start_sim: Any) -> None:
    sim = start_sim("--garbage-rate", "1")
    response = httpx.post(sim.url + "/generate", json=GENERATE)
    assert response.status_code == 200
    with pytest.raises(ValueError):
        response.json()


def test_faults_can_be_changed_at_run_time(start_sim: Any) -> None:
    sim = start_sim()
    with httpx.Client(base_url=sim.url) as client:
        assert client.post("/generate", json=GENERATE).status_code == 200
        settings = client.post("/sim/faults", json={"error_rate": 1.0}).json()
        assert settings["error_rate"] == 1.0
        assert client.post("/generate", json=GENERATE).status_code in (500, 503)
        client.post("/sim/faults", json={"error_rate": 0})
        assert client.post("/generate", json=GENERATE).status_code == 200
        assert client.post("/sim/faults", json={"reset_rate": 2}).status_code == 400


def test_crash_after_requests(start_sim: Any) -> None:
    sim = start_sim("--crash-after-requests", "2")
    with httpx.Client(base_url=sim.url) as client:
        assert client.post("/generate", json=GENERATE).status_code == 200
        assert client.post("/generate", json=GENERATE).status_code == 200
    assert sim.wait_exit(timeout=30) == -9  # kill_process_tree SIGKILLs itself
    logged(sim, "SCHED_EXC", "SIGQUIT_RUN")
    with pytest.raises(httpx.ConnectError):
        httpx.post(sim.url + "/generate", json=GENERATE)


def test_sim_crash_drops_in_flight_requests(start_sim: Any) -> None:
    sim = start_sim("--tokens-per-s", "20")
    outcome: dict[str, Any] = {}

    def slow_request() -> None:
        try:
            outcome["response"] = httpx.post(sim.url + "/generate", timeout=30, json={
                **GENERATE, "sampling_params": {"max_new_tokens": 500, "ignore_eos": True}})
        except httpx.TransportError as e:
            outcome["error"] = e

    worker = threading.Thread(target=slow_request)
    worker.start()
    with httpx.Client(base_url=sim.url) as client:
        while client.get("/sim/state").json()["running"] == 0:
            pass
        with pytest.raises(httpx.TransportError):
            client.post("/sim/crash")
    worker.join(timeout=30)
    assert "error" in outcome and "response" not in outcome
    assert sim.wait_exit(timeout=30) == -9


def test_out_of_vocab_id_takes_the_server_down_like_the_recording(start_sim: Any) -> None:
    sim = start_sim()
    with pytest.raises(httpx.RemoteProtocolError):  # curl: "Empty reply from server"
        httpx.post(sim.url + "/generate", json={"input_ids": [1, 163840],
                                                "sampling_params": {"max_new_tokens": 4}})
    assert sim.wait_exit(timeout=30) == -9
    recorded = (RECORDINGS / "error_out_of_vocab_server_log.txt").read_text()
    assert message_sequence(sim.log_text().split("Uvicorn running")[-1]) == \
        message_sequence(recorded)
    assert "IndexError: index out of range in self\n" in sim.log_text()


def message_sequence(log: str) -> list[str]:
    """The prefixed log messages after the crash, numbers and tags removed."""
    messages = []
    for line in log.splitlines():
        match = PREFIX.match(line)
        if match and "INFO:" not in line and "Prefill batch" not in line \
                and "fired up" not in line:
            messages.append(re.sub(r"\d+", "N", match.group(3).split(":")[0]))
    return messages[messages.index("Scheduler hit an exception"):]


def test_api_key(start_sim: Any) -> None:
    sim = start_sim("--api-key", "sekret")
    with httpx.Client(base_url=sim.url) as client:
        denied = client.post("/generate", json=GENERATE)
        assert denied.status_code == 401 and denied.json() == {"error": "Unauthorized"}
        wrong = client.post("/generate", json=GENERATE, headers={"Authorization": "Bearer x"})
        assert wrong.status_code == 401
        allowed = client.post("/generate", json=GENERATE,
                              headers={"Authorization": "Bearer sekret"})
        assert allowed.status_code == 200
        assert client.get("/health").status_code == 200  # probes need no key
        assert client.get("/model_info").status_code == 401

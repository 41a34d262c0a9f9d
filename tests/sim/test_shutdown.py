"""SIGTERM drains like SGLang: /health 503, in-flight requests finish, then exit 0."""

from __future__ import annotations

import re
import signal
import threading
from typing import Any

import httpx
import pytest
from sim_helpers import FATAL_PATTERNS, chat_prompt

from eagle_tui.core.sim.launcher import SimProcess

pytestmark = pytest.mark.slow

# --time-scale 0.02 turns SGLang's 5 s drain poll into 0.1 s
SLOW_ARGS = ("--time-scale", "0.02", "--tokens-per-s", "40")


def in_background(sim: SimProcess, tokens: int) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["response"] = httpx.post(sim.url + "/generate", timeout=60, json={
                "input_ids": chat_prompt("drain me"), "rid": "draining-1",
                "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True}})
        except httpx.TransportError as e:
            outcome["error"] = e

    worker = threading.Thread(target=run)
    worker.start()
    with httpx.Client(base_url=sim.url) as client:
        while client.get("/sim/state").json()["running"] == 0:
            pass
    return worker, outcome


def test_sigterm_drains_in_flight_requests_then_exits_zero(start_sim: Any) -> None:
    sim = start_sim(*SLOW_ARGS)
    worker, outcome = in_background(sim, tokens=30)
    since = sim.mark()
    sim.terminate()
    sim.wait_for_line(r"SIGTERM received\. signum=15 frame=.*\. Draining requests and shutting "
                      r"down\.\.\.$", timeout=10, since=since)
    assert httpx.get(sim.url + "/health").status_code == 503
    sim.wait_for_line(r"Health check request received during shutdown\. Returning 503\.",
                      timeout=10, since=since)
    sim.wait_for_line(r"Gracefully exiting\.\.\. Remaining number of requests 1\. Remaining "
                      r"requests remaining_rids=\['draining-1'\]\.", timeout=10, since=since)
    worker.join(timeout=30)
    response = outcome["response"]
    assert response.status_code == 200
    assert len(response.json()["output_ids"]) == 30
    assert sim.wait_exit(timeout=30) == 0
    sim.wait_for_line(r"Gracefully exiting\.\.\. Remaining number of requests 0\. Remaining "
                      r"requests remaining_rids=\[\]\.", timeout=1, since=since)
    shutdown = re.compile(FATAL_PATTERNS["SHUTDOWN"])
    shutdown_lines = [line for line in sim.log_lines() if shutdown.search(line)]
    assert len(shutdown_lines) >= 3


def test_a_second_sigterm_exits_at_once(start_sim: Any) -> None:
    sim = start_sim(*SLOW_ARGS)
    worker, outcome = in_background(sim, tokens=2000)
    since = sim.mark()
    sim.terminate()
    sim.wait_for_line(r"SIGTERM received\.", timeout=10, since=since)
    sim.terminate()
    assert sim.wait_exit(timeout=10) == -signal.SIGTERM
    worker.join(timeout=30)
    assert "error" in outcome  # the in-flight request was dropped


def test_sigterm_during_start_up_ends_the_process(start_sim: Any) -> None:
    sim = start_sim("--time-scale", "0.2", wait=None)
    sim.wait_for_line(r"Load weight begin", timeout=30)
    sim.terminate()
    assert sim.wait_exit(timeout=10) == -signal.SIGTERM

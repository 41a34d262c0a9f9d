"""The live acceptance of simulated servers in ``status --once --json``: every source and its
fallback (metrics, the decode log, the lifetime figure), each labelled, the 1.00 alarm, a
server without speculation, through SGLang's router for each worker; and the sliding window
the Server view keeps."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.router import RouterProcess, router_installed
from support.waiting import wait_until

from eagle_tui.core.accept.window import GENERATION_TOKENS, VERIFY_CALLS
from eagle_tui.core.clock import SystemClock
from eagle_tui.core.health.acceptance import AcceptanceTracker
from eagle_tui.core.sglang import SGLangClient
from eagle_tui.core.sglang.client import parse_prometheus
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.urls import ServerURL

pytestmark = pytest.mark.slow

FAST = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0")
SPEC = ("--speculative-algorithm", "EAGLE3")
PROMPT = {"text": "hello there, how are you", "sampling_params": {"max_new_tokens": 60}}


def status(tmp_path: Path, *args: str) -> dict[str, Any]:
    env = {"EAGLE_TUI_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", "status", "--once",
                           "--json", *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode in (0, 3), done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def serve(sim: SimProcess, count: int = 4) -> list[dict[str, Any]]:
    return [httpx.post(f"{sim.url}/generate", timeout=30, json={
        **PROMPT, "text": f"{PROMPT['text']} {i}"}).json()["meta_info"] for i in range(count)]


def acceptance_of(report: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = report["servers"][0]["acceptance"]
    return entry


def test_metrics_first_since_start_equal_to_the_servers_counters(tmp_path: Path) -> None:
    with SimProcess([*FAST, *SPEC, "--enable-metrics"]) as sim:
        sim.wait_ready(60)
        serve(sim)
        counters = parse_prometheus(httpx.get(f"{sim.url}/metrics").text)
        entry = acceptance_of(status(tmp_path, "--url", sim.url, "--log", str(sim.log_path)))
    figure = entry["figure"]
    assert entry["config"]["algorithm"] == "EAGLE3" and entry["alarm"] is None
    assert (figure["source"], figure["window"]) == ("metrics", "since start")
    assert figure["accept_length"] == pytest.approx(
        counters[GENERATION_TOKENS] / counters[VERIFY_CALLS])
    assert entry["label"].endswith("(metrics, since start)")


def test_the_decode_log_without_metrics_then_the_lifetime_figure(tmp_path: Path) -> None:
    with SimProcess([*FAST, *SPEC, "--decode-log-interval", "1"]) as sim:
        sim.wait_ready(60)
        serve(sim)
        wait_until(lambda: sim.log_text().count("accept len:") >= 5, what="decode lines")
        with_log = acceptance_of(status(tmp_path, "--url", sim.url, "--log", str(sim.log_path)))
        lifetime = httpx.get(f"{sim.url}/server_info").json()["internal_states"][0][
            "avg_spec_accept_length"]
        without_log = acceptance_of(status(tmp_path, "--url", sim.url))
    assert with_log["figure"]["source"] == "decode_log"
    assert with_log["figure"]["accept_rate"] is not None
    assert without_log["figure"]["source"] == "lifetime"
    assert without_log["figure"]["window"] == "lifetime"
    assert without_log["figure"]["accept_length"] == pytest.approx(lifetime)


def test_no_speculation_and_the_one_alarm(tmp_path: Path) -> None:
    with SimProcess([*FAST, "--enable-metrics"]) as plain, \
            SimProcess([*FAST, "--enable-metrics", "--speculative-algorithm", "EAGLE",
                        "--speculative-draft-model-path", "/m/a-eagle3-drafter"]) as stuck:
        plain.wait_ready(60)
        stuck.wait_ready(60)
        serve(plain)
        serve(stuck)
        report = status(tmp_path, "--url", plain.url, "--url", stuck.url)
        text = subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", "status", "--url",
                               stuck.url], capture_output=True, text=True, timeout=120,
                              env={"EAGLE_TUI_STATE_DIR": str(tmp_path / "s2"),
                                   "PATH": "/usr/bin:/bin"}).stdout
    off, on = (server["acceptance"] for server in report["servers"])
    assert off["config"]["algorithm"] is None and off["figure"] is None
    assert on["alarm"]["kind"] == "stuck_at_one"
    assert "ALARM" in text and "--speculative-algorithm" in text


@pytest.mark.skipif(not router_installed(), reason="pip install sglang-router==0.3.2")
def test_through_the_router_each_worker_has_its_own_figure(tmp_path: Path) -> None:
    with SimProcess([*FAST, *SPEC, "--enable-metrics"]) as low, \
            SimProcess([*FAST, *SPEC, "--enable-metrics", "--sim-draft-acceptance", "0.95"]) \
            as high:
        low.wait_ready(60)
        high.wait_ready(60)
        serve(low)
        serve(high)
        with RouterProcess([low.url, high.url]) as router:
            router.wait_workers(2)
            # the workers are asked directly only when the user trusts them (issue 24.3)
            report = status(tmp_path, "--url", router.url, "--trust-router-workers")
    workers = {w["url"]: w["acceptance"] for w in report["servers"][0]["router"]["workers"]}
    assert workers[low.url]["figure"]["source"] == "metrics"
    assert workers[high.url]["figure"]["accept_length"] > \
        workers[low.url]["figure"]["accept_length"] + 0.2


def test_the_tracker_windows_the_counters_and_keeps_a_history() -> None:
    async def run(sim: SimProcess) -> tuple[Any, Any, list[float]]:
        async with SGLangClient(ServerURL.parse(sim.url)) as client:
            tracker = AcceptanceTracker(client, SystemClock(), window_s=3600)
            await tracker.sample()
            metas = await asyncio.to_thread(serve, sim, 3)
            live = await tracker.sample()
            return live, metas, list(tracker.history)

    with SimProcess([*FAST, *SPEC, "--enable-metrics"]) as sim:
        sim.wait_ready(60)
        live, metas, history = asyncio.run(run(sim))
    assert live is not None and live.figure is not None and live.figure.source == "metrics"
    expected = sum(m["completion_tokens"] for m in metas) / sum(m["spec_verify_ct"] for m in metas)
    assert live.figure.accept_length == pytest.approx(expected)
    assert history[-1] == live.figure.accept_length

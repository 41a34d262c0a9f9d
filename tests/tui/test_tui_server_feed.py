"""Issue 38 items 2 and 7 at a server's feed (the dashboard's source), against a real sim
with ``/metrics``: the live gauges are the load while it serves, with the time they were
true; idle gauges read idle since the log's last batch line; ``/server_info`` is read once,
and an idle server is scraped at most once a minute."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import httpx
import pytest

from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import HealthSnapshot
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.options import ServerTarget
from eagle_tui.tui.sources.server import ServerFeed

pytestmark = pytest.mark.slow

METRICS = ("--tp-size", "1", "--tokens-per-s", "40", "--decode-log-interval", "10",
           "--enable-metrics")


INFO = r'"GET /server_info '


def lines_of(path: Path, pattern: str) -> int:
    return sum(1 for line in path.read_text().splitlines() if re.search(pattern, line))


def test_gauges_are_the_load_then_idle_and_an_idle_server_is_left_alone(start_sim) -> None:
    sim = start_sim(*METRICS)
    target = ServerTarget(ServerURL.parse(sim.url), name="m", log_file=sim.log_path)
    feed = ServerFeed(target, settings=WatchSettings(poll_interval_s=0.3), use_history=False,
                      accept_every_s=0.5)
    seen: list[HealthSnapshot] = []
    stop = threading.Event()
    runner = threading.Thread(target=feed.run, args=(stop, lambda item: seen.append(item)
                                                     if isinstance(item, HealthSnapshot)
                                                     else None))
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while not any(s.phase == "ready" for s in seen):
            assert time.monotonic() < deadline, "never ready"
            time.sleep(0.2)
        httpx.post(f"{sim.url}/generate", timeout=60, json={
            "text": "a long answer", "sampling_params": {"max_new_tokens": 200,
                                                          "ignore_eos": True}})
        served = time.monotonic()
        busy = [s.load for s in seen if s.load and s.load.source == "metrics" and s.load.current]
        assert busy and busy[-1].running == 1 and busy[-1].at is not None, "no live gauges"
        print("while serving:", busy[-1])
        while not (seen[-1].load and seen[-1].load.source == "metrics"
                   and not seen[-1].load.current):
            assert time.monotonic() - served < 30, seen[-1].load
            time.sleep(0.2)
        idle = seen[-1].load
        print(f"{time.monotonic() - served:.1f} s after the request:", idle)
        assert idle is not None and idle.running == 0 and idle.idle_since is not None

        info_before = lines_of(sim.log_path, INFO)
        metrics_before = lines_of(sim.log_path, r'"GET /metrics ')
        time.sleep(20.0)  # forty of its half-second looks, had it kept looking
        info = lines_of(sim.log_path, INFO) - info_before
        metrics = lines_of(sim.log_path, r'"GET /metrics ') - metrics_before
        in_all = lines_of(sim.log_path, INFO)
        print(f"in 20 s idle: /server_info {info}, /metrics {metrics}; /server_info in all "
              f"{in_all}")
        assert info == 0 and metrics <= 1
    finally:
        stop.set()
        runner.join(30)

"""Issue 38 item 2 in ``status``: a load figure from the log carries the time it was true
and expires after a few decode-log intervals (no ``/metrics`` here: the log is the only
source), instead of reading as current for ever."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

EAGLE_TUI = str(Path(sys.executable).with_name("eagle-tui"))
LOG_ONLY = ("--tp-size", "1", "--tokens-per-s", "40", "--decode-log-interval", "10")


def status(sim, *extra: str) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    return subprocess.run([EAGLE_TUI, "status", "--once", "--url", sim.url, "--log",
                           str(sim.log_path), *extra], capture_output=True, text=True,
                          timeout=60)


def load_of(sim) -> dict:  # type: ignore[no-untyped-def, type-arg]
    done = status(sim, "--json")
    return json.loads(done.stdout)["servers"][0]["load"]


@pytest.mark.slow
def test_a_decode_line_reads_current_then_idle_since(start_sim) -> None:
    sim = start_sim(*LOG_ONLY)
    request = threading.Thread(target=lambda: httpx.post(
        f"{sim.url}/generate", timeout=60, json={"text": "a long answer", "sampling_params": {
            "max_new_tokens": 320, "ignore_eos": True}}))
    request.start()
    sim.wait_for_line("Decode batch", timeout=60)
    busy = load_of(sim)
    print("while serving:", json.dumps(busy))
    assert busy["current"] and busy["source"] == "log" and busy["running"] == 1
    assert busy["age_s"] < 10 and busy["idle_since"] is None
    request.join()
    served = time.monotonic()
    while (load := load_of(sim))["current"]:
        assert time.monotonic() - served < 60, load
        time.sleep(1.0)
    took = time.monotonic() - served
    print(f"idle {took:.1f} s after the last request:", json.dumps(load))
    assert load["idle_since"] is not None and load["idle_since"] <= time.time() - 5
    text = status(sim).stdout
    print(text)
    assert "load: idle since " in text and "running 1" not in text


DECODE = ("[2025-03-07 11:02:{s:02d} TP0] Decode batch. #running-req: 3, #token: 44, "
          "token usage: 0.00, gen throughput (token/s): 90.00, #queue-req: 1")


@pytest.mark.parametrize(("gap", "expires"), [(5.0, 15.0), (1.0, 10.0)])
def test_a_log_figure_expires_after_three_decode_log_intervals(gap: float, expires: float
                                                               ) -> None:
    from eagle_tui.core.health.load import expiry_s, log_load
    from eagle_tui.core.health.logtrack import LogTracker
    from eagle_tui.core.health.phase import Phase
    from eagle_tui.core.health.settings import WatchSettings
    from eagle_tui.core.serverlog.parser import parse_text

    log, settings = LogTracker(), WatchSettings()
    for n in range(5):
        for event in parse_text(DECODE.format(s=n)):
            log.apply(event, 100.0 + n * gap)
    last = 100.0 + 4 * gap
    assert expiry_s(log, settings) == expires  # 3 x the interval, at least 10 s
    fresh = log_load(log, Phase.READY, last + expires - 0.5, 5000.0, settings)
    stale = log_load(log, Phase.READY, last + expires + 0.5, 5000.0, settings)
    down = log_load(log, Phase.CRASHED, last + 0.5, 5000.0, settings)
    assert fresh is not None and fresh.current and fresh.running == 3 and fresh.queued == 1
    assert stale is not None and not stale.current
    assert stale.idle_since == pytest.approx(5000.0 - expires - 0.5)
    assert down is not None and not down.current and down.idle_since is None

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

pytestmark = pytest.mark.slow

EAGLE_TUI = str(Path(sys.executable).with_name("eagle-tui"))
LOG_ONLY = ("--tp-size", "1", "--tokens-per-s", "40", "--decode-log-interval", "10")


def status(sim, *extra: str) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    return subprocess.run([EAGLE_TUI, "status", "--once", "--url", sim.url, "--log",
                           str(sim.log_path), *extra], capture_output=True, text=True,
                          timeout=60)


def load_of(sim) -> dict:  # type: ignore[no-untyped-def, type-arg]
    done = status(sim, "--json")
    return json.loads(done.stdout)["servers"][0]["load"]


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

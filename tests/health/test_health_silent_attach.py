"""Issue 38 item 1: silence is measured by the server's clocks (the log file's last write,
its dated lines) from the first look. Attached to a start-up whose log has been silent for
14 minutes, ``watch`` calls the stall at once (exit 4) instead of after another limit; a
one-look ``diagnose`` states no duration it cannot know."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.silent_log import silent_sim

pytestmark = pytest.mark.slow

EAGLE_TUI = str(Path(sys.executable).with_name("eagle-tui"))
LIMIT_S = 6 * 60  # the default limit of a shard step: a watch that times from its attach
# would wait at least this long


def test_watch_exits_4_at_once_on_a_log_silent_for_14_minutes(start_sim) -> None:
    sim = silent_sim(start_sim)
    began = time.monotonic()
    done = subprocess.run([EAGLE_TUI, "watch", "--url", sim.url, "--log", str(sim.log_path)],
                          capture_output=True, text=True, timeout=LIMIT_S)
    took = time.monotonic() - began
    print(f"watch exit {done.returncode} after {took:.1f} s\n{done.stdout}{done.stderr}")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "no log progress for 14m" in done.stdout
    assert took < LIMIT_S / 2  # a stall timed from the attach could not be called before


def test_diagnose_states_no_duration_it_cannot_know(start_sim, tmp_path: Path) -> None:
    sim = start_sim("--tp-size", "1", "--rank-hang", "stop", "--time-scale", "0.05", wait=None)
    sim.wait_for_line("Load weight begin", timeout=60)
    stopped_at = _wait_stopped(sim.pid)
    time.sleep(max(0.0, 5.0 - (time.monotonic() - stopped_at)))  # stopped well before we look
    done = subprocess.run([EAGLE_TUI, "diagnose", "--pid", str(sim.pid), "--log",
                           str(sim.log_path), "--no-stacks"],
                          capture_output=True, text=True, timeout=120)
    print(done.stdout)
    assert done.returncode == 0, done.stderr
    assert "stopped by a signal" in done.stdout
    assert "stopped by a signal for" not in done.stdout  # it was seen for a second only
    assert "stopped for" not in done.stdout
    assert "the processes say: stopped: " in done.stdout  # not "stopped (1s)"


def _wait_stopped(root: int, timeout: float = 60.0) -> float:
    """When a process of the tree under ``root`` was first seen stopped (state T)."""
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tree = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
        if any(p.status() == psutil.STATUS_STOPPED for p in tree):
            return time.monotonic()
        time.sleep(0.2)
    raise AssertionError("no rank stopped")


def test_watch_prints_events_in_the_order_the_log_wrote_them(start_sim) -> None:
    sim = start_sim("--tp-size", "1")  # its whole start-up is in the log when watch attaches
    done = subprocess.run([EAGLE_TUI, "watch", "--url", sim.url, "--log", str(sim.log_path)],
                          capture_output=True, text=True, timeout=120)
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    events = [line.split("] ", 1)[-1] for line in done.stdout.splitlines()]
    graphs = next(i for i, e in enumerate(events) if e.startswith("capturing graphs"))
    shards = next(i for i, e in enumerate(events) if e.startswith("loading shards"))
    ready = next(i for i, e in enumerate(events) if e.startswith("phase ready"))
    assert shards < graphs < ready

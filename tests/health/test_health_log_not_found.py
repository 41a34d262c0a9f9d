"""Issue 20 item 4: attached to a server whose log is not found (the sim writing to its own
``--log-file``, its stdout nowhere), ``watch`` invents no timings: a server already up is
"ready, start-up not seen" (never ``ready after <time since the process started>``, never
``launching`` first, never ``slow_startup``), times count from the process's start, and it
says the log was not found and how to pass it. Real processes: the sim on an OS port."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from support.processes import kill_tree
from support.waiting import wait_until

from eagle_tui.core.sim.launcher import free_port
from eagle_tui.tui.cli.main import main

pytestmark = pytest.mark.slow

FAST = ("--interval", "0.05", "--health-timeout", "2", "--no-history", "--expected", "2")


@pytest.fixture
def sim_without_log(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A sim whose log goes to its own --log-file (not found from its stdout), ready and
    up for a few seconds before the watch attaches."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "eagle_tui.core.sim", "--port", str(port), "--time-scale", "0",
         "--log-file", str(tmp_path / "elsewhere.log")],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: answers(url), 60, "the sim ready", every=0.1)
        started = psutil.Process(process.pid).create_time()
        wait_until(lambda: time.time() - started > 3, 10, "the sim up a while", every=0.1)
        yield url, process.pid
    finally:
        kill_tree([process.pid])
        process.wait(timeout=10)


def answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_server_up_before_the_watch_is_ready_with_its_start_not_seen(
        sim_without_log: tuple[str, int], capsys: pytest.CaptureFixture[str]) -> None:
    url, pid = sim_without_log
    assert main(["watch", *FAST, "--url", url, "--pid", str(pid)]) == 0
    lines = capsys.readouterr().out.splitlines()
    text = "\n".join(lines)
    assert "note: log not found" in text and "pass --log FILE" in text
    assert "phase launching" not in text and "slow_startup" not in text
    assert "since launch" not in text and " after " not in lines[-1]
    assert "start-up not seen" in lines[-1] and f"PID {pid} started at" in lines[-1]

    assert main(["watch", *FAST, "--json", "--url", url, "--pid", str(pid)]) == 0
    verdict = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert verdict["outcome"] == "ready" and verdict["ready_after_s"] is None
    age = time.time() - psutil.Process(pid).create_time()
    assert 3 < verdict["elapsed_s"] <= age + 1  # from the process's start, not the attach

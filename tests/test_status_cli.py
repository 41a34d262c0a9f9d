"""``eagle-tui status --once --json`` in a fresh interpreter: JSON out, exit code by health."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eagle_tui.core.batches.registry import BatchRecord, Registry
from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.capture.config import CaptureConfig
from eagle_tui.core.sim.launcher import SimProcess, free_port
from eagle_tui.core.urls import ServerURL

pytestmark = pytest.mark.slow


def status(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"EAGLE_TUI_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", "status", "--once", *args],
                          capture_output=True, text=True, timeout=60, env=env,
                          cwd=Path(__file__).resolve().parent.parent)


def test_ready_server_exits_0_with_its_snapshot(sim_server: SimProcess, tmp_path: Path) -> None:
    done = status(tmp_path, "--json", "--url", sim_server.url, "--log", str(sim_server.log_path))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    (server,) = report["servers"]
    assert server["url"] == sim_server.url and server["phase"] == "ready"
    assert server["progress"]["shards_done"] == server["progress"]["shards_total"]
    assert report["batches"] == [] and report["exit_code"] == 0


def test_unreachable_server_exits_3(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = status(tmp_path, "--url", url)
    assert done.returncode == 3
    assert url in done.stdout


def test_log_without_url_is_a_usage_error(tmp_path: Path) -> None:
    done = status(tmp_path, "--log", "/nonexistent.log")
    assert done.returncode == 2 and "--log" in done.stderr


def test_a_finished_demo_s_leftovers_are_ignored(tmp_path: Path) -> None:
    """A demo killed so hard its keeper died too leaves a record whose worker and server
    are gone: status reports neither (it used to exit 3 forever, the server being known)."""
    state = tmp_path / "state"
    out_dir = state / "demo" / "run-x" / "batch"
    url = f"http://127.0.0.1:{free_port()}"
    record = BatchRecord(
        id="20260101-000000-dead", name="batch", out_dir=str(out_dir),
        socket=str(out_dir / "control.sock"), log=str(out_dir / "worker.log"),
        config=CaptureConfig(prompts=Path("p.jsonl"), out_dir=out_dir,
                             servers=(ServerURL.parse(url),),
                             tokenizer=Path("tok")),
        created_at=time.time(), final_state=BatchState.STOPPED)
    Registry(state / "batches").save(record)
    done = status(tmp_path, "--json")
    report = json.loads(done.stdout)
    assert (done.returncode, report["servers"], report["batches"]) == (0, [], [])

"""``eagle-tui watch --launch`` on a real SGLang (0.5.23 on the CPU, scripts/realsglang): a
rank killed mid-start-up reads as crashed with its cause, a deliberate SIGTERM as stopped.

Skipped unless ``EAGLE_REAL_SGLANG_VENV`` is a venv with SGLang and ``EAGLE_REAL_SGLANG_MODEL``
a model it serves on the CPU (``scripts/realsglang/realsglang.sh install`` and ``model
script`` make both); ``EAGLE_REAL_SGLANG_PORT`` picks the port (30011).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from support.processes import kill_tree
from support.waiting import log_contains, wait_until

VENV = os.environ.get("EAGLE_REAL_SGLANG_VENV")
MODEL = os.environ.get("EAGLE_REAL_SGLANG_MODEL")
PORT = int(os.environ.get("EAGLE_REAL_SGLANG_PORT", "30011"))
START_S = 300.0

pytestmark = [
    pytest.mark.slow,
    pytest.mark.realsglang,
    pytest.mark.skipif(
        not (VENV and MODEL), reason="set EAGLE_REAL_SGLANG_VENV and EAGLE_REAL_SGLANG_MODEL"
    ),
]


def sglang_command() -> list[str]:
    return [
        f"{VENV}/bin/python", "-m", "sglang.launch_server", "--model-path", str(MODEL),
        "--device", "cpu", "--host", "127.0.0.1", "--port", str(PORT),
        "--attention-backend", "torch_native", "--sampling-backend", "pytorch",
        "--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled",
        "--disable-overlap-schedule", "--sleep-on-idle", "--dtype", "float32",
        "--mem-fraction-static", "0.05", "--max-total-tokens", "8192",
    ]  # fmt: skip


def start_watch(log: Path, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1"}
    env["TRANSFORMERS_OFFLINE"] = "1"
    command = [
        str(Path(sys.executable).with_name("eagle-tui")), "watch", "--json", "--no-history",
        "--url", f"http://127.0.0.1:{PORT}", "--log", str(log), *extra, "--launch", "--",
        *sglang_command(),
    ]  # fmt: skip
    with open(out, "wb") as stdout:
        return subprocess.Popen(command, stdout=stdout, stderr=subprocess.STDOUT, env=env)


def events(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.read_text().splitlines() if line.startswith("{")]


def server_pid(out: Path) -> int:
    wait_until(lambda: any(e.get("event") == "phase" for e in events(out)), 60, "first phase")
    for event in events(out):
        if event.get("event") == "phase" and "PID" in str(event.get("detail")):
            return int(str(event["detail"]).split("PID ")[1].split(";")[0])
    raise AssertionError("no PID in the first phase line")


def test_a_rank_killed_mid_start_up_reads_as_crashed_with_its_cause(tmp_path: Path) -> None:
    log, out = tmp_path / "server.log", tmp_path / "watch.jsonl"
    watch = start_watch(log, out)
    pid = None
    try:
        wait_until(log_contains(log, "Init parallel begin"), START_S, "distributed init")
        pid = server_pid(out)
        ranks = [p for p in psutil.Process(pid).children() if "scheduler" in " ".join(p.cmdline())]
        assert ranks, "no scheduler process"
        ranks[0].send_signal(signal.SIGKILL)
        assert watch.wait(timeout=120) == 3
        verdict = events(out)[-1]
        assert verdict["outcome"] == "crashed" and verdict["reached"] == "distributed_init"
        assert "Rank 0 scheduler died during initialization (exit code: -9)" in verdict["diagnosis"]
        assert "OOM killer" in verdict["next_step"]
    finally:
        kill_tree([p for p in (watch.pid, pid) if p is not None])


def test_a_deliberate_sigterm_reads_as_stopped(tmp_path: Path) -> None:
    log, out = tmp_path / "server.log", tmp_path / "watch.jsonl"
    watch = start_watch(log, out, "--keep-watching")
    pid = None
    try:
        wait_until(log_contains(log, "fired up and ready to roll"), START_S, "ready")
        pid = server_pid(out)
        os.killpg(pid, signal.SIGTERM)  # the whole group, as scripts/realsglang's stop does
        assert watch.wait(timeout=120) == 7
        verdict = events(out)[-1]
        assert verdict["outcome"] == "stopped" and "SIGTERM received" in verdict["diagnosis"]
        assert not [f for f in verdict["flags"] if f["flag"].startswith("fatal")]
    finally:
        kill_tree([p for p in (watch.pid, pid) if p is not None])

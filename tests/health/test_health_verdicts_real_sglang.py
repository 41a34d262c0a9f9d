"""The watcher's verdicts on a real SGLang 0.5.23 (CPU) made to hang for real (issue 19).

``scripts/realsglang/hang.py start CASE`` starts each server (node 0 of 2 with no node 1; the
weight shard a named pipe nobody writes; the scheduler SIGSTOPped after ``Load weight
begin``; a plain start), and the watcher ``eagle-tui watch --url … --log … --pid …`` builds,
with its default settings and the system clock, watches it from its first lines until a
verdict. Each test prints the time from the last log line (or the stop) to the verdict.

Opt-in: skipped unless ``REALSGLANG_HOME`` holds the install of docs/real-sglang.md (its
``venv`` and ``script-model``; ``EAGLE_REAL_SGLANG_VENV`` / ``EAGLE_REAL_SGLANG_MODEL``
override them). One server at a time: run it with ``-n 0``.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.waiting import wait_until

from eagle_tui.core.health.assemble import WatchOptions, build_watcher
from eagle_tui.core.health.snapshot import HealthSnapshot, Outcome
from eagle_tui.core.urls import ServerURL

HOME = os.environ.get("REALSGLANG_HOME")
VENV = os.environ.get("EAGLE_REAL_SGLANG_VENV") or (f"{HOME}/venv" if HOME else None)
MODEL = os.environ.get("EAGLE_REAL_SGLANG_MODEL") or (f"{HOME}/script-model" if HOME else None)
HANG = Path(__file__).resolve().parents[2] / "scripts" / "realsglang" / "hang.py"
START_S = 900.0  # a loaded 2-core machine takes minutes to import SGLang

pytestmark = [
    pytest.mark.slow,
    pytest.mark.realsglang,
    pytest.mark.skipif(not (HOME or (VENV and MODEL)), reason="set REALSGLANG_HOME"),
]


@dataclass
class Started:
    workdir: Path
    port: int
    popen: subprocess.Popen[str]

    @property
    def log(self) -> Path:
        return self.workdir / "server.log"

    def pid(self, timeout: float = 60.0) -> int:
        pidfile = self.workdir / "server.pid"
        wait_until(pidfile.exists, timeout, "hang.py's server.pid")
        return int(pidfile.read_text())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def hang(tmp_path: Path) -> Iterator[type[Started]]:
    started: list[Started] = []

    def start(case: str) -> Started:
        workdir, port = tmp_path / case, _free_port()
        popen = subprocess.Popen(
            [sys.executable, str(HANG), "start", case, "--venv", str(VENV), "--model",
             str(MODEL), "--workdir", str(workdir), "--port", str(port), "--timeout",
             str(START_S)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        run = Started(workdir, port, popen)
        started.append(run)
        return run

    yield start  # type: ignore[misc]
    for run in started:
        if run.popen.poll() is None:
            run.popen.kill()
        run.popen.wait()
        for stream in (run.popen.stdout, run.popen.stderr):
            if stream is not None:
                stream.close()
        subprocess.run([sys.executable, str(HANG), "stop", "--workdir", str(run.workdir)],
                       timeout=60)


async def _watch(run: Started, tmp_path: Path, timeout: float) -> list[HealthSnapshot]:
    options = WatchOptions(url=ServerURL.parse(f"http://127.0.0.1:{run.port}"),
                           log_path=run.log, pid=run.pid(),
                           history_path=tmp_path / "history.jsonl", gpu=False)
    watcher = build_watcher(options)
    seen: list[HealthSnapshot] = []
    try:
        await asyncio.wait_for(
            watcher.run(seen.append, until=lambda s: s.verdict is not None), timeout
        )
    finally:
        await watcher.aclose()
    return seen


def _report(case: str, final: HealthSnapshot, figure: float, what: str) -> None:
    verdict = final.verdict
    assert verdict is not None
    print(f"\n[{case}] {verdict.outcome.value} ({verdict.cause or '-'}) {figure:.1f}s after "
          f"{what}: {verdict.diagnosis[:600]}")


async def test_node_zero_alone_is_waiting_for_peers(hang, tmp_path: Path) -> None:
    run = hang("peers")
    seen = await _watch(run, tmp_path, START_S)
    final = seen[-1]
    verdict = final.verdict
    assert verdict is not None and verdict.outcome == Outcome.STALLED, verdict
    assert verdict.cause == "waiting for peers"
    info = json.loads(run.popen.communicate(timeout=60)[0].splitlines()[-1])
    address = info["dist_addr"]
    assert f"distributed init {address}: this node hosts the store; 1 of 2 ranks" in (
        verdict.diagnosis
    )
    assert "missing node 1 (rank 1)" in verdict.diagnosis
    assert final.stacks is not None and "waiting for peers" in final.stacks.describe()
    assert final.last_log_age_s is not None and final.last_log_age_s <= 60
    _report("peers", final, final.last_log_age_s, "the last log line")


async def test_a_weight_shard_that_is_a_named_pipe_is_blocked_on_io(
    hang, tmp_path: Path
) -> None:
    run = hang("fifo")
    seen = await _watch(run, tmp_path, START_S)
    final = seen[-1]
    verdict = final.verdict
    assert verdict is not None and verdict.cause == "blocked on I/O", verdict
    assert verdict.diagnosis.startswith("blocked on I/O: model.safetensors: ")
    assert "opening a FIFO that no process writes" in verdict.diagnosis
    assert final.stacks is not None and "model.safetensors" in final.stacks.describe()
    assert final.last_log_age_s is not None and final.last_log_age_s <= 60
    _report("fifo", final, final.last_log_age_s, "the last log line")


async def test_a_stopped_scheduler_is_stopped_naming_the_rank(hang, tmp_path: Path) -> None:
    run = hang("stop")
    seen = await _watch(run, tmp_path, START_S)
    final = seen[-1]
    verdict = final.verdict
    assert verdict is not None and verdict.cause == "stopped", verdict
    info = json.loads(run.popen.communicate(timeout=60)[0].splitlines()[-1])
    assert verdict.diagnosis.startswith(f"stopped: scheduler (PID {info['stopped_pid']}) stopped")
    assert final.evidence is not None
    rank = final.evidence.by_pid(info["stopped_pid"])
    assert rank is not None and rank.state_s <= 15
    assert final.stacks is not None and final.stacks.folds
    _report("stop", final, rank.state_s, "the SIGSTOP")


async def test_a_plain_start_is_ready_with_no_flag(hang, tmp_path: Path) -> None:
    run = hang("plain")
    seen = await _watch(run, tmp_path, START_S)
    final = seen[-1]
    assert final.verdict is not None and final.verdict.outcome == Outcome.READY, final.flags
    flagged = {f.name for s in seen for f in s.flags}
    assert not flagged, flagged
    busy = [s.busy.evidence for s in seen if s.busy is not None]
    print(f"\n[plain] busy past a step's limit in {len(busy)} of {len(seen)} ticks"
          + (f", e.g. {busy[0][:300]}" if busy else ""))
    assert any(s.evidence is not None and s.evidence.ranks for s in seen)
    _report("plain", final, final.elapsed_s or 0.0, "launch")

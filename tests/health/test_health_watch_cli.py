"""``eagle-tui watch``: exit codes, text and JSON lines, for each scenario, against the sim."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.processes import kill_tree

from eagle_tui.core.health.snapshot import Outcome
from eagle_tui.core.sim.launcher import SimProcess, free_port
from eagle_tui.tui.cli.main import main
from eagle_tui.tui.cli.watch import EXIT_CODES

pytestmark = pytest.mark.slow

StartSim = Callable[..., SimProcess]
QUICK = ("--time-scale", "0.05", "--tp-size", "2", "--health-latency", "0")
FAST = ("--interval", "0.05", "--health-timeout", "1", "--no-history")
ROOT = Path(__file__).resolve().parents[2]


def watch(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["watch", *FAST, *args])
    return code, capsys.readouterr().out.splitlines()


def json_lines(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines]


def attach(sim: SimProcess) -> tuple[str, ...]:
    return ("--url", sim.url, "--log", str(sim.log_path), "--pid", str(sim.pid))


def test_exit_codes_are_distinct() -> None:
    codes = list(EXIT_CODES.values())
    assert len(set(codes)) == len(codes)
    assert EXIT_CODES[Outcome.READY] == 0


def test_ready_in_text_mode_prints_each_phase_once(
    start_sim: StartSim, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = start_sim(*QUICK, wait=None)
    code, lines = watch(capsys, *attach(sim))
    assert code == 0
    assert lines[0].startswith(f"watching url {sim.url}")
    assert lines[-1].startswith("READY (exit 0): ready: ")
    assert "since launch (expected within 10m00s)" in lines[-1]
    phase_lines = [line for line in lines if "] phase " in line]
    assert len(phase_lines) == len(set(phase_lines))
    assert any("loading shards 64/64 (100%)" in line for line in lines)


def test_launch_ready_json_lines_then_the_server_keeps_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    command = [sys.executable, "-m", "eagle_tui.core.sim", *QUICK, "--port", str(port)]
    code, lines = watch(
        capsys,
        "--url",
        f"http://127.0.0.1:{port}",
        "--log",
        str(log),
        "--json",
        "--launch",
        "--",
        *command,
    )
    events = json_lines(lines)
    verdict = events[-1]
    try:
        assert code == 0
        assert (verdict["event"], verdict["outcome"], verdict["exit_code"]) == (
            "verdict",
            "ready",
            0,
        )
        phases = [e["phase"] for e in events if e["event"] == "phase"]
        assert phases[0] == "launching" and phases[-1] == "ready"
        assert set(phases) <= {
            "launching",
            "distributed_init",
            "loading_weights",
            "allocating_kv",
            "capturing_graphs",
            "warming_up",
            "ready",
        }
        assert any(e["event"] == "progress" and e.get("shards_done") == 64 for e in events)
        assert "Load weight begin" in log.read_text()
    finally:
        kill_tree([verdict["pid"]])


def test_crash_exits_3_naming_the_fatal_line(
    start_sim: StartSim, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = start_sim(*QUICK, "--fatal", "oom", wait=None)
    code, lines = watch(capsys, *attach(sim), "--json")
    verdict = json_lines(lines)[-1]
    assert code == 3
    assert verdict["outcome"] == "crashed"
    assert "fatal:oom" in verdict["diagnosis"] and "CUDA out of memory" in verdict["diagnosis"]
    flags = [e["flag"] for e in json_lines(lines) if e["event"] == "flag"]
    assert "fatal:oom" in flags


def test_stall_exits_4_naming_the_phase(
    start_sim: StartSim, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = start_sim(*QUICK, "--stall-at", "capturing_graphs", wait=None)
    sim.wait_for_line("Load weight begin", timeout=30)  # past the interpreter's start-up
    code, lines = watch(capsys, *attach(sim), "--stall", "1")
    assert code == 4
    # the sim's process is alive and quiet: the processes make the stall a hang
    assert lines[-1].startswith("STALLED (exit 4): hung: every process quiet (no CPU, no I/O")
    assert "no log progress for" in lines[-1] and "in capturing_graphs" in lines[-1]
    assert f"(PID {sim.pid}) sleeping" in lines[-1] and "stacks 0s ago:" in lines[-1]


def test_launch_refuses_while_another_process_holds_the_port(
    port_holders: Callable[..., Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = port_holders()
    command = [sys.executable, "-m", "eagle_tui.core.sim", *QUICK, "--port", str(old.port)]
    code, lines = watch(
        capsys,
        "--url",
        f"http://127.0.0.1:{old.port}",
        "--log",
        str(tmp_path / "s.log"),
        "--port-grace",
        "0",
        "--json",
        "--launch",
        "--",
        *command,
    )
    verdict = json_lines(lines)[-1]
    assert code == 5
    assert verdict["outcome"] == "port_conflict"
    assert f"PID {old.pid}" in verdict["diagnosis"] and "--replace" in verdict["diagnosis"]
    assert not (tmp_path / "s.log").exists()  # nothing was launched


def test_launch_with_replace_stops_the_old_holder_first(
    port_holders: Callable[..., Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = port_holders()
    command = [sys.executable, "-m", "eagle_tui.core.sim", *QUICK, "--port", str(old.port)]
    code, lines = watch(
        capsys,
        "--url",
        f"http://127.0.0.1:{old.port}",
        "--log",
        str(tmp_path / "s.log"),
        "--replace",
        "--json",
        "--launch",
        "--",
        *command,
    )
    events = json_lines(lines)
    try:
        assert code == 0
        steps = [e["step"] for e in events if e["event"] == "stop"]
        assert any(f"SIGTERM to PID {old.pid}" in s for s in steps)
        assert old.popen.poll() is not None
    finally:
        kill_tree([events[-1]["pid"]])


def test_address_in_use_at_bind_exits_5(
    start_sim: StartSim, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = start_sim(*QUICK, "--fatal", "address-in-use", wait=None)
    code, lines = watch(capsys, *attach(sim))
    assert code == 5
    assert lines[-1].startswith("PORT_CONFLICT (exit 5): address_in_use:")


def test_timeout_exits_6_with_where_it_was(
    start_sim: StartSim, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = start_sim(*QUICK, "--slow-phase", "loading_weights=400", wait=None)
    sim.wait_for_line("Load weight begin", timeout=30)
    code, lines = watch(capsys, *attach(sim), "--timeout", "0.3", "--json")
    verdict = json_lines(lines)[-1]
    assert code == 6
    assert verdict["outcome"] == "timeout"
    assert "still loading_weights" in verdict["diagnosis"]


def test_sigterm_while_keep_watching_exits_7(start_sim: StartSim) -> None:
    sim = start_sim(*QUICK)
    watcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eagle_tui.tui.cli",
            "watch",
            *FAST,
            *attach(sim),
            "--keep-watching",
            "--json",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert watcher.stdout is not None
    try:
        for line in watcher.stdout:
            event = json.loads(line)
            if event["event"] == "phase" and event["phase"] == "ready":
                break
        sim.terminate()
        rest = [json.loads(line) for line in watcher.stdout]
        assert watcher.wait(timeout=30) == 7
        assert rest[-1]["outcome"] == "stopped"
        assert "SIGTERM received" in rest[-1]["diagnosis"]
    finally:
        watcher.kill()
        watcher.wait()
        watcher.stdout.close()


def test_url_only_mode(start_sim: StartSim, capsys: pytest.CaptureFixture[str]) -> None:
    sim = start_sim(*QUICK)
    code, lines = watch(capsys, "--url", sim.url, "--url-only", "--json")
    assert code == 0
    assert json_lines(lines)[-1]["pid"] is None


@pytest.mark.parametrize(
    "args",
    [
        ("--url", "http://127.0.0.1:1", "--launch"),
        ("--url", "http://127.0.0.1:1", "--", "python"),
        ("--url", "http://127.0.0.1:1", "--launch", "--", "/nonexistent/server-binary"),
    ],
)
def test_usage_errors_exit_2(args: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["watch", *FAST, "--port-grace", "0", *args])
    assert code == 2

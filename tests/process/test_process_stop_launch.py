"""Safe stop and managed restart against real processes, and the optional NVML reader."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.processes import PORTHOLDER, kill_tree, spawn_holder
from support.waiting import log_contains, poll_until, wait_exit

from eagle_tui.core.clock import SystemClock
from eagle_tui.core.health.state import WatchState
from eagle_tui.core.health.watcher import Watcher
from eagle_tui.core.proc import gpu
from eagle_tui.core.proc.launcher import ManagedServer
from eagle_tui.core.proc.ports import port_status
from eagle_tui.core.proc.stop import StopTimeouts, stop_process_tree

pytestmark = pytest.mark.slow

Spawn = Callable[..., Any]
FAST = StopTimeouts(term_s=5.0, kill_s=5.0, release_s=5.0, poll_s=0.02)


async def test_sigterm_stops_the_tree_and_releases_the_port(port_holders: Spawn) -> None:
    holder = port_holders("--children", "2")
    report = await stop_process_tree(
        holder.pid, port=holder.port, timeouts=FAST, reap=holder.popen.poll
    )
    assert report.stopped and not report.escalated
    assert report.port_released is True
    assert report.clear
    assert any("SIGTERM" in step for step in report.steps)
    assert holder.popen.returncode == 0


async def test_a_process_ignoring_sigterm_is_killed_after_the_timeout(port_holders: Spawn) -> None:
    holder = port_holders("--ignore-term", "--children", "1")
    quick = StopTimeouts(term_s=0.3, kill_s=5.0, release_s=5.0, poll_s=0.02)
    report = await stop_process_tree(
        holder.pid, port=holder.port, timeouts=quick, reap=holder.popen.poll
    )
    assert report.stopped and report.escalated
    assert any("SIGKILL" in step for step in report.steps)
    assert holder.popen.returncode == -9
    assert wait_exit(holder.children[0], 1)  # the orphaned rank went too


async def test_stopping_a_process_that_is_already_gone() -> None:
    report = await stop_process_tree(2**22 + 7, timeouts=FAST)
    assert report.stopped and not report.escalated
    assert "not running" in report.steps[0]


async def test_managed_server_logs_rotates_and_restarts_only_once_the_port_is_free(
    tmp_path: Path,
) -> None:
    probe = spawn_holder()
    port = probe.port
    kill_tree([probe.pid])
    probe.popen.wait()
    assert probe.popen.stdout is not None
    probe.popen.stdout.close()
    log = tmp_path / "server.log"
    argv = [sys.executable, str(PORTHOLDER), "--bind", str(port), "--children", "1"]
    server = ManagedServer(argv, log_path=log, port=port)
    try:
        first = server.start()
        assert poll_until(log_contains(log, "READY"))
        watcher = Watcher(WatchState(has_log=False, has_process=True), clock=SystemClock())
        result = await watcher.restart_managed(server, FAST)
        assert result.started and result.pid != first
        assert result.stop is not None and result.stop.clear
        assert (tmp_path / "server.log.prev").read_text().startswith("READY")
        assert poll_until(log_contains(log, "READY"))  # the new one could bind the same port
        assert port_status(port).holder_pid == server.pid
    finally:
        report = await server.stop(FAST)
        assert report is not None and report.stopped
    assert server.exit_code() == 0


def test_launching_a_missing_command_raises_oserror(tmp_path: Path) -> None:
    server = ManagedServer(["/nonexistent/server"], log_path=tmp_path / "x.log")
    with pytest.raises(OSError):
        server.start()


def test_gpu_reader_without_nvml_says_no_gpu_information(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu, "_nvml", None)
    monkeypatch.setattr(gpu, "_init_error", None)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    report = gpu.read_gpus()
    assert not report.available
    assert "no GPU information" in report.reason


def test_gpu_reader_with_a_fake_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetHandleByIndex=lambda i: f"h{i}",
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=70 << 30, total=80 << 30),
        nvmlDeviceGetName=lambda h: b"H100",
        nvmlDeviceGetComputeRunningProcesses=lambda h: [
            types.SimpleNamespace(pid=4242, usedGpuMemory=69 << 30)
        ],
    )
    monkeypatch.setattr(gpu, "_nvml", None)
    monkeypatch.setattr(gpu, "_init_error", None)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    report = gpu.read_gpus()
    assert report.available
    device = report.devices[0]
    assert (device.name, device.used_bytes, device.processes[0].pid) == ("H100", 70 << 30, 4242)
    monkeypatch.setattr(gpu, "_nvml", None)

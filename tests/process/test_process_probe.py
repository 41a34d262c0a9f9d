"""The process probe against real child processes that bind ports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from support.waiting import wait_exit

from eagle_tui.core.proc.discover import find_server_pid
from eagle_tui.core.proc.ports import port_status
from eagle_tui.core.proc.probe import ProcessProbe

pytestmark = pytest.mark.slow

Spawn = Callable[..., Any]  # the `port_holders` fixture (tests/conftest.py)


def test_probe_reports_alive_process_children_cpu_and_its_own_port(
    port_holders: Spawn,
) -> None:
    holder = port_holders("--children", "2")
    probe = ProcessProbe(holder.pid, port=holder.port)
    report = probe.probe()
    assert report.problems == ()
    proc = report.process
    assert proc is not None and proc.alive
    assert proc.pid == holder.pid
    assert sorted(c.pid for c in proc.children) == sorted(holder.children)
    assert proc.create_time is not None
    assert "portholder.py" in proc.cmdline
    assert report.port is not None
    assert (report.port.bound, report.port.holder_pid, report.port.held_by_server) == (
        True,
        holder.pid,
        True,
    )
    assert probe.probe().process.cpu_percent is not None  # type: ignore[union-attr]


def test_another_process_on_the_port_is_not_the_server(port_holders: Spawn) -> None:
    old = port_holders()
    new = port_holders()
    report = ProcessProbe(new.pid, port=old.port).probe()
    assert report.port is not None
    assert report.port.holder_pid == old.pid
    assert report.port.held_by_server is False
    assert f"PID {old.pid}" in report.port.describe_holder()


def test_a_child_that_dies_is_reported_lost(port_holders: Spawn) -> None:
    holder = port_holders("--children", "2")
    probe = ProcessProbe(holder.pid, port=holder.port)
    probe.probe()
    os.kill(holder.children[0], signal.SIGKILL)
    assert wait_exit(holder.children[0])
    report = probe.probe()
    assert report.process is not None
    assert [c.pid for c in report.process.children] == [holder.children[1]]
    assert [c.pid for c in report.process.children_lost] == [holder.children[0]]


def test_exit_code_of_a_managed_child_and_gone_state(port_holders: Spawn) -> None:
    holder = port_holders()
    probe = ProcessProbe(holder.pid, port=holder.port, exit_code=holder.popen.poll)
    assert probe.probe().process.alive  # type: ignore[union-attr]
    holder.popen.send_signal(signal.SIGKILL)
    holder.popen.wait(timeout=5)
    report = probe.probe()
    assert report.process is not None
    assert not report.process.alive
    assert report.process.exit_code == -9
    assert "SIGKILL" in report.process.describe_exit()
    assert report.port is not None and not report.port.bound


def test_a_pid_that_does_not_exist_is_not_found_not_an_error() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    report = ProcessProbe(child.pid).probe()
    assert report.problems == ()
    assert report.process is not None
    assert (report.process.alive, report.process.status) == (False, "not-found")


def test_discovery_finds_the_newest_server_on_the_port(port_holders: Spawn) -> None:
    free = port_holders()
    port = free.port
    # Servers are recognised by how they are launched (python -m sglang.launch_server), so
    # the holders run under that name (a word in the arguments no longer counts).
    launch = "sglang.launch_server"
    first = port_holders("--port", "1", module=launch)  # a server on another port
    old = port_holders("--port", str(port), module=launch)
    assert find_server_pid(port) == old.pid
    newer = port_holders(f"--port={port}", module=launch)
    assert find_server_pid(port) == newer.pid
    assert find_server_pid(port + 1) is None or find_server_pid(port + 1) not in (
        old.pid,
        newer.pid,
    )
    probe = ProcessProbe(port=port, discover=True)
    assert probe.probe().process.pid == newer.pid  # type: ignore[union-attr]
    assert first.pid != newer.pid


def test_adopting_a_pid_from_the_log(port_holders: Spawn) -> None:
    holder = port_holders()
    probe = ProcessProbe(port=holder.port)
    assert probe.probe().process is None
    probe.adopt(holder.pid)
    assert probe.probe().process.pid == holder.pid  # type: ignore[union-attr]


def test_port_status_of_a_free_port() -> None:
    status = port_status(1)
    assert not status.bound

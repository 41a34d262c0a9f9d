"""Leftover SGLang processes: real processes titled the way SGLang titles its ranks
(``exec -a sglang::scheduler_TP0``), orphaned by their launcher's exit, holding a port; and a
live server's ranks, which are not orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.processes import kill_tree
from support.waiting import wait_until

from eagle_tui.core.proc.orphans import OrphanReport, Watched, find_orphans, orphans_in

# A rank that listens on a port and says which, started under SGLang's title by a shell
# that exits at once, so the rank is reparented (to PID 1 or the nearest subreaper).
RANK = (
    "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
    "print(s.getsockname()[1], flush=True); time.sleep(600)"
)
LAUNCHER = r"""
import subprocess, sys, time
rank = subprocess.Popen(["bash", "-c", 'exec -a sglang::scheduler_TP0 "$0" -c "$1"',
                         sys.executable, "import time; time.sleep(600)"])
print(rank.pid, flush=True)
time.sleep(600)
"""


@pytest.fixture
def pids() -> Iterator[list[int]]:
    started: list[int] = []
    yield started
    for pid in started:
        os.kill(pid, signal.SIGCONT) if _alive(pid) else None
    kill_tree(started)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_an_orphaned_rank_holding_the_port_is_found_with_what_it_holds(
    pids: list[int], tmp_path: Path
) -> None:
    out = tmp_path / "port"
    shell = subprocess.run(
        ["bash", "-c", 'exec -a sglang::scheduler_TP0 "$0" -c "$1" >"$2" 2>&1 </dev/null & echo $!',
         sys.executable, RANK, str(out)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    pid = int(shell.stdout.strip())
    pids.append(pid)
    wait_until(lambda: out.exists() and out.read_text().strip().isdigit(), 30, "the rank's port")
    port = int(out.read_text())
    report = find_orphans(Watched(ports=frozenset({port})))
    (orphan,) = [o for o in report.orphans if o.pid == pid]
    assert orphan.title == "sglang::scheduler_TP0" and orphan.ports == (port,)
    assert orphan.reasons[0].startswith("its launcher is gone (parent PID ")
    assert orphan.reasons[1] == f"holds the watched server's port {port}"
    assert orphan.state == "sleeping" and orphan.rss_bytes
    # other engineers' leftovers may be on the host too: ours is one of the PIDs killed
    assert str(pid) in report.stop_command.removeprefix("kill ").split(" && ")[0].split()
    os.kill(pid, signal.SIGSTOP)
    wait_until(lambda: _state(pid) == "T", 10, "the rank stopped")
    stopped = next(o for o in find_orphans().orphans if o.pid == pid)
    assert stopped.state == "stopped"
    assert f"kill -CONT {pid}" in OrphanReport((stopped,)).stop_command
    assert stopped.describe().startswith(f"PID {pid} sglang::scheduler_TP0, ")
    assert f"listens on {port}" in stopped.describe()


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


@pytest.mark.slow
def test_a_live_servers_ranks_are_not_orphans(pids: list[int], tmp_path: Path) -> None:
    fake = tmp_path / "mods" / "sglang"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "launch_server.py").write_text(LAUNCHER)
    launcher = subprocess.Popen(
        [sys.executable, "-m", "sglang.launch_server", "--port", "1"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(tmp_path / "mods")},
    )  # fmt: skip
    pids.append(launcher.pid)
    assert launcher.stdout is not None
    rank = int(launcher.stdout.readline())
    wait_until(lambda: Path(f"/proc/{rank}/cmdline").read_bytes().startswith(b"sglang::"), 30,
               "the rank's title")  # fmt: skip
    assert rank not in {o.pid for o in find_orphans().orphans}
    launcher.kill()  # the launcher dies; its rank stays (nothing set a parent-death signal)
    launcher.wait()
    launcher.stdout.close()
    pids.append(rank)
    wait_until(lambda: rank in {o.pid for o in find_orphans().orphans}, 30, "the rank orphaned")


def test_the_decision_on_a_process_table() -> None:
    table = {
        1: {"ppid": 0, "cmdline": ["/sbin/init"], "name": "init", "create_time": 0.0},
        100: {"ppid": 1, "cmdline": ["python", "-m", "sglang.launch_server", "--port", "30000"],
              "name": "python", "create_time": 900.0, "status": "sleeping"},
        101: {"ppid": 100, "cmdline": ["sglang::scheduler_TP0"], "name": "sglang::schedul",
              "create_time": 950.0, "status": "sleeping"},
        200: {"ppid": 1, "cmdline": ["sglang::scheduler_TP1"], "name": "sglang::schedul",
              "create_time": 100.0, "status": "stopped", "username": "ann"},
        300: {"ppid": 1, "cmdline": ["python", "-m", "sglang.launch_server", "--port", "30001"],
              "name": "python", "create_time": 500.0, "status": "sleeping"},
        400: {"ppid": 1, "cmdline": ["python", "worker.py"], "name": "python", "create_time": 1.0},
    }  # fmt: skip
    gpu = {200: 40 << 30}
    report = orphans_in(table, Watched(frozenset({100}), frozenset({30001})), gpu, {}, 1000.0)
    # 101 is a live server's rank, 300 a server whose ranks are not ours and that holds
    # nothing we watch, 400 not SGLang: only the leftover TP1 is an orphan
    assert [o.pid for o in report.orphans] == [200]
    tp1 = report.orphans[0]
    assert tp1.reasons == ("its launcher is gone (parent PID 1)",
                           "holds GPU memory outside the watched server")  # fmt: skip
    assert tp1.describe() == (
        "PID 200 sglang::scheduler_TP1, 15m00s old, stopped: its launcher is gone (parent PID 1);"
        " holds GPU memory outside the watched server; holds 40.0 GiB of GPU memory"
    )
    assert report.stop_command == "kill 200 && kill -CONT 200"
    assert orphans_in(table, Watched(), {}, {}, 1000.0).orphans[0].pid == 200
    assert OrphanReport().describe() == ["no leftover SGLang processes"]

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
    assert orphan.reasons[0].startswith("its launcher is gone (re-parented to PID ")
    assert orphan.reasons[1] == f"holds the watched server's port {port}"
    assert orphan.state == "sleeping" and orphan.rss_bytes
    # other engineers' leftovers may be on the host too: ours is one of the PIDs named
    assert f" {pid}:{orphan.start_ticks} " in report.stop_command or (
        f"/proc/{pid}/stat" in report.stop_command)
    os.kill(pid, signal.SIGSTOP)
    wait_until(lambda: _state(pid) == "T", 10, "the rank stopped")
    stopped = next(o for o in find_orphans().orphans if o.pid == pid)
    assert stopped.state == "stopped"
    assert f"kill -CONT {pid}" in OrphanReport((stopped,)).stop_command
    assert stopped.describe().startswith(f"PID {pid} sglang::scheduler_TP0, owner root, ")
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
    me, ann = os.getuid(), os.getuid() + 4242
    table = {
        1: {"ppid": 0, "cmdline": ["/sbin/init"], "name": "init", "create_time": 0.0},
        100: {"ppid": 1, "cmdline": ["python", "-m", "sglang.launch_server", "--port", "30000"],
              "name": "python", "create_time": 900.0, "status": "sleeping"},
        101: {"ppid": 100, "cmdline": ["sglang::scheduler_TP0"], "name": "sglang::schedul",
              "create_time": 950.0, "status": "sleeping"},
        200: {"ppid": 1, "cmdline": ["sglang::scheduler_TP1"], "name": "sglang::schedul",
              "create_time": 100.0, "status": "stopped", "username": "ann", "uid": ann},
        201: {"ppid": 1, "cmdline": ["sglang::scheduler_TP2"], "name": "sglang::schedul",
              "create_time": 100.0, "status": "sleeping", "username": "me", "uid": me},
        202: {"ppid": 1, "cmdline": ["sglang::scheduler_TP3"], "name": "sglang::schedul",
              "create_time": 100.0, "status": "zombie", "username": "me", "uid": me},
        300: {"ppid": 1, "cmdline": ["python", "-m", "sglang.launch_server", "--port", "30001"],
              "name": "python", "create_time": 500.0, "status": "sleeping"},
        400: {"ppid": 1, "cmdline": ["python", "worker.py"], "name": "python", "create_time": 1.0},
        # a job script (alive) running a rank-titled helper in its own group: started by it
        500: {"ppid": 1, "cmdline": ["bash", "job.sh"], "name": "bash", "pgid": 500, "sid": 500},
        501: {"ppid": 500, "cmdline": ["sglang::helper"], "name": "sglang::helper",
              "pgid": 500, "sid": 500, "status": "sleeping"},
        # a subreaper (systemd --user) that adopted a rank from another session
        600: {"ppid": 1, "cmdline": ["systemd", "--user"], "name": "systemd", "pgid": 600,
              "sid": 600},
        601: {"ppid": 600, "cmdline": ["sglang::scheduler_TP4"], "name": "sglang::schedul",
              "pgid": 700, "sid": 700, "status": "sleeping", "uid": me, "username": "me"},
        # a router renamed by setproctitle, under a job script: a server, never a leftover
        800: {"ppid": 1, "cmdline": ["sglang::router"], "name": "sglang::router",
              "status": "sleeping"},
    }  # fmt: skip
    gpu = {200: 40 << 30}
    report = orphans_in(table, Watched(frozenset({100}), frozenset({30001})), gpu, {}, 1000.0)
    # 101 is a live server's rank, 300 a server (a server is never a leftover), 400 not
    # SGLang, 202 a zombie, 501 started by a live job script, 800 a router: the leftovers are
    # TP1 (ann's), TP2 (ours) and TP4 (adopted by a subreaper)
    assert [o.pid for o in report.orphans] == [200, 201, 601]
    tp1 = report.orphans[0]
    assert tp1.reasons == ("its launcher is gone (re-parented to PID 1)",
                           "holds GPU memory outside the watched server")  # fmt: skip
    assert tp1.describe() == (
        "PID 200 sglang::scheduler_TP1, owner ann, not yours: theirs to stop, 15m00s old, "
        "stopped: its launcher is gone (re-parented to PID 1); holds GPU memory outside the "
        "watched server; holds 40.0 GiB of GPU memory"
    )
    assert report.orphans[2].reasons[0] == (
        "its launcher is gone (re-parented to PID 600 systemd, a subreaper)")
    assert [o.pid for o in report.ours] == [201, 601]
    assert [o.pid for o in report.theirs] == [200]
    guard = ("[ \"$(cut -d' ' -f22 /proc/{0}/stat)\" = None ] && [ -O /proc/{0} ] && grep -qzE "
             "'^sglang::scheduler_TP{1}( .*)?$' /proc/{0}/cmdline && kill {0} && kill -CONT {0}")
    assert report.stop_command == f"{guard.format(201, 2)}; {guard.format(601, 4)}"
    assert "200" not in report.stop_command  # another user's: never offered
    assert report.describe()[-1] == "not offered for stopping: 1 of other users (ann)"
    assert OrphanReport().describe() == ["no leftover SGLang processes"]

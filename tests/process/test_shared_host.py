"""A shared GPU host (issue 38 items 3 and 4): the server behind a URL is the process the
kernel says listens on its port, never one whose command line merely claims it; a leftover
is a process whose launcher is really gone; only the user's own leftovers are offered for
stopping, and a stop re-checks the process at the moment of the kill.

Real processes throughout, and a real second local account (``second_user``: made with
``useradd`` and removed after) where another user's process is the point.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.processes import kill_tree
from support.second_user import LocalUser
from support.terminal import PtyTerminal
from support.waiting import wait_until

from eagle_tui.core.proc import procfs
from eagle_tui.core.proc.discover import find_server_pid
from eagle_tui.core.proc.orphans import (
    Orphan,
    OrphanReport,
    Watched,
    find_orphans,
    still_the_same,
    stop_orphans,
)
from eagle_tui.core.proc.probe import ProcessProbe
from eagle_tui.core.sim.launcher import SimProcess, free_port

pytestmark = pytest.mark.slow

StartSim = Callable[..., SimProcess]
QUICK = ("--time-scale", "0.05", "--tp-size", "2", "--health-latency", "0")
SLEEP = "import time; time.sleep(600)"


@pytest.fixture
def pids() -> Iterator[list[int]]:
    started: list[int] = []
    yield started
    for pid in started:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            continue
    kill_tree(started)


def _fake_sglang(home: Path) -> Path:
    """A ``sglang`` package whose ``launch_server`` only sleeps: a process that says
    ``python -m sglang.launch_server --port P`` and listens nowhere (readable by the user)."""
    package = home / "mods" / "sglang"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "launch_server.py").write_text(SLEEP + "\n")
    for path in (home / "mods", package, *package.iterdir()):
        path.chmod(0o755)
    return home / "mods"


def _their_python(user: LocalUser) -> str:
    """A Python the other user may run (the test's own may live under root's home)."""
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        try:
            ran = user.run([candidate, "-c", "pass"], check=False, capture_output=True)
        except OSError:
            continue  # not theirs to run
        if ran.returncode == 0:
            return candidate
    pytest.skip(f"no Python that {user.name} may run")


def _claim(user: LocalUser, port: int) -> subprocess.Popen[bytes]:
    """Another user's process whose command line claims ``--port PORT``."""
    mods = _fake_sglang(user.home)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(user.home), "PYTHONPATH": str(mods)}
    claim = user.popen([_their_python(user), "-m", "sglang.launch_server", "--model-path", "m",
                        "--port", str(port)], env=env)
    wait_until(lambda: b"sglang.launch_server" in Path(f"/proc/{claim.pid}/cmdline")
               .read_bytes(), 30, "the claim's command line")
    return claim


def _alive(pid: int) -> bool:
    stat = procfs.read_stat(pid)
    return stat is not None and stat.state != "Z"


def _titled(title: str, python: str = sys.executable) -> list[str]:
    """A shell line that starts ``python`` (sleeping) under ``title`` in the background and
    exits at once (its child is re-parented: its launcher is gone), printing the PID."""
    return ["bash", "-c", f'exec -a {title} "$0" -c "$1" </dev/null >/dev/null 2>&1 & echo $!',
            python, SLEEP]


# -- 3. the server is the listener -------------------------------------------------------------

def test_another_users_claim_on_our_port_is_not_the_server(
    second_user: LocalUser, start_sim: StartSim
) -> None:
    sim = start_sim(*QUICK)
    claim = _claim(second_user, sim.port)
    assert find_server_pid(sim.port) == sim.pid  # the listener, not the newest claim
    report = ProcessProbe(port=sim.port, discover=True).probe()
    assert report.process is not None and report.process.pid == sim.pid
    assert report.port is not None and report.port.held_by_server is True
    leftovers = find_orphans(Watched(frozenset({sim.pid}), frozenset({sim.port})))
    assert not {sim.pid, claim.pid} & {o.pid for o in leftovers.orphans}
    # what watch passed before, the claim as "the server": the real one is still no leftover
    wrong = find_orphans(Watched(frozenset({claim.pid}), frozenset({sim.port})))
    assert sim.pid not in {o.pid for o in wrong.orphans}
    print(f"\nlistener {sim.pid} (sim, {os.getuid()}), claim {claim.pid} "
          f"({second_user.name}): server = PID {report.process.pid}")
    one_look = subprocess.run(
        [str(Path(sys.executable).with_name("eagle-tui")), "diagnose", "--url", sim.url,
         "--no-stacks"], capture_output=True, text=True, timeout=90, check=False)
    print("\n".join(one_look.stdout.splitlines()[:6]))
    assert one_look.returncode == 0, one_look.stdout + one_look.stderr
    assert f"PID {sim.pid}" in one_look.stdout and f"PID {claim.pid}" not in one_look.stdout


def test_an_older_claim_does_not_take_the_url_from_the_listener_in_diagnose(
    second_user: LocalUser,
) -> None:
    port = free_port()
    claim = _claim(second_user, port)  # there first: the oldest "server on the port"
    with SimProcess(QUICK, port=port) as sim:
        sim.wait_ready(60)
        one_look = subprocess.run(
            [str(Path(sys.executable).with_name("eagle-tui")), "diagnose", "--url", sim.url,
             "--no-stacks", "--json"], capture_output=True, text=True, timeout=90,
            check=False)
    assert one_look.returncode == 0, one_look.stdout + one_look.stderr
    doc = json.loads(one_look.stdout)
    print(f"\nclaim {claim.pid} (older), listener {sim.pid}: diagnose names PID "
          f"{doc['pid']}")
    assert doc["pid"] == sim.pid


def test_our_own_claim_counts_only_when_newer_than_the_listener(tmp_path: Path,
                                                                 pids: list[int]) -> None:
    """An own server started after the listener is a new start-up that will meet the holder
    at bind time (the port conflict to report while it loads); an older own claim that
    never bound is not the server while a server listens."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(_fake_sglang(tmp_path))}
    claim = [sys.executable, "-m", "sglang.launch_server", "--port", str(port)]
    older = subprocess.Popen(claim, env=env)
    pids.append(older.pid)
    with SimProcess(QUICK, port=port) as sim:
        sim.wait_ready(60)
        assert find_server_pid(port) == sim.pid
        newer = subprocess.Popen(claim, env=env)
        pids.append(newer.pid)
        wait_until(lambda: find_server_pid(port) == newer.pid, 30, "the newer claim taken")
    for process in (older, newer):
        process.kill()
        process.wait()


def test_watch_does_not_call_a_claim_a_port_conflict(
    second_user: LocalUser, start_sim: StartSim
) -> None:
    sim = start_sim(*QUICK)
    _claim(second_user, sim.port)
    done = subprocess.run(
        [str(Path(sys.executable).with_name("eagle-tui")), "watch", "--url", sim.url,
         "--interval", "0.2", "--no-history", "--timeout", "40"],
        capture_output=True, text=True, timeout=90, check=False)
    print(f"\n$ eagle-tui watch --url {sim.url}  (exit {done.returncode})\n{done.stdout}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"PID {sim.pid} started" in done.stdout  # the listener is the server it names
    assert "conflict" not in done.stdout.lower() and "leftover" not in done.stdout.lower()


def test_the_dashboard_offers_no_stop_of_the_healthy_server(
    second_user: LocalUser, start_sim: StartSim
) -> None:
    sim = start_sim(*QUICK)
    claim = _claim(second_user, sim.port)
    with PtyTerminal(["--url", sim.url, "--refresh", "0.3"], cols=140, rows=50) as term:
        term.wait_for("ready")
        time.sleep(3)  # the watcher's orphan look (every few s) had its chance
        term.press("o")
        time.sleep(1)
        screen = term.text()
        print(f"\nthe dashboard after o:\n{screen}")
        assert f"PID {sim.pid} " in screen  # the listener is the server on the card
        assert "Stop leftovers" not in screen  # the footer offers no such key
        assert "leftover SGLang process" not in screen  # no question asked
        assert "conflict" not in screen.lower(), screen
    assert _alive(sim.pid) and _alive(claim.pid)


# -- leftovers: launcher really gone ------------------------------------------------------------

WRAPPER = """#!/bin/bash
# a job script: starts the router and stays (its parent, alive)
"$PYTHON" -m sglang_router.launch_router --host 127.0.0.1 --port "$PORT" \\
  --prometheus-host 127.0.0.1 --prometheus-port "$METRICS" --worker-urls http://127.0.0.1:9 \\
  --log-level warn
"""


def test_a_router_started_by_a_job_script_is_no_leftover(tmp_path: Path) -> None:
    router_support = pytest.importorskip("support.router")
    if not router_support.router_installed():
        pytest.skip("sglang-router is not installed")
    script = tmp_path / "job.sh"
    script.write_text(WRAPPER)
    port, metrics = free_port(), free_port()
    job = subprocess.Popen(["bash", str(script)], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env={**os.environ, "PYTHON": sys.executable, "PORT": str(port),
                                "METRICS": str(metrics)}, start_new_session=True)
    try:
        _job_router_is_no_leftover(job, port)
    finally:
        kill_tree([job.pid])
        job.wait(timeout=10)


def _job_router_is_no_leftover(job: subprocess.Popen[bytes], port: int) -> None:
    router: list[int] = []

    def titled() -> bool:
        router[:] = [int(p) for p in os.listdir("/proc") if p.isdigit() and Path(
            f"/proc/{p}/stat").exists() and _ppid(int(p)) == job.pid]
        return bool(router) and _argv0(router[0]).startswith("sglang::")

    wait_until(titled, 60, "the router's title set")
    wait_until(lambda: _listening(port), 60, "the router listening")
    report = find_orphans(Watched(ports=frozenset({port})))
    print(f"\njob script {job.pid} -> router {router[0]} {_argv0(router[0])}: "
          f"{[o.describe() for o in report.orphans if o.pid in (job.pid, router[0])]}")
    assert router[0] not in {o.pid for o in report.orphans}
    assert find_server_pid(port) == router[0]  # and it is the server behind its URL


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _ppid(pid: int) -> int | None:
    stat = procfs.read_stat(pid)
    return stat.ppid if stat is not None else None


def _argv0(pid: int) -> str:
    argv = procfs.read_argv(pid)
    return argv[0] if argv else ""


LAUNCHER = r"""
import subprocess, sys, time
rank = subprocess.Popen(["bash", "-c", 'exec -a sglang::scheduler_TP0 "$0" -c "$1"',
                         sys.executable, "import time; time.sleep(600)"])
print(rank.pid, flush=True)
time.sleep(600)
"""


def test_a_leftover_whose_launcher_was_killed_is_found_and_stopped(
    tmp_path: Path, pids: list[int]
) -> None:
    fake = tmp_path / "mods" / "sglang"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "launch_server.py").write_text(LAUNCHER)
    launcher = subprocess.Popen(
        [sys.executable, "-m", "sglang.launch_server", "--port", "1"], stdout=subprocess.PIPE,
        text=True, env={**os.environ, "PYTHONPATH": str(tmp_path / "mods")})
    pids.append(launcher.pid)
    assert launcher.stdout is not None
    rank = int(launcher.stdout.readline())
    pids.append(rank)
    wait_until(lambda: _argv0(rank).startswith("sglang::"), 30, "the rank's title")
    assert rank not in {o.pid for o in find_orphans().orphans}  # its launcher is alive
    launcher.kill()
    launcher.wait()
    launcher.stdout.close()
    wait_until(lambda: rank in {o.pid for o in find_orphans().ours}, 30, "the rank orphaned")
    report = find_orphans()
    (found,) = [o for o in report.orphans if o.pid == rank]
    said = stop_orphans(OrphanReport((found,)), grace_s=5)
    print(f"\n{found.describe()}\nstop: {said}")
    assert found.reasons[0].startswith("its launcher is gone (re-parented to PID ")
    assert said == [f"PID {rank}: stopped"]
    wait_until(lambda: not _alive(rank), 10, "the leftover gone")


# -- 4. only ours to stop ------------------------------------------------------------------------

def test_another_users_leftover_is_shown_as_theirs_and_never_stopped(
    second_user: LocalUser,
) -> None:
    started = second_user.run(_titled("sglang::scheduler_TP5", _their_python(second_user)),
                              capture_output=True)
    pid = int(started.stdout.split()[0])
    wait_until(lambda: pid in {o.pid for o in find_orphans().orphans}, 30, "their leftover")
    report = find_orphans()
    (theirs,) = [o for o in report.orphans if o.pid == pid]
    assert theirs.user == second_user.name and not theirs.mine
    assert f"owner {second_user.name}, not yours" in theirs.describe()
    assert pid not in {o.pid for o in report.ours}
    assert str(pid) not in report.stop_command
    assert any(second_user.name in line for line in report.describe())
    said = stop_orphans(OrphanReport((theirs,)), grace_s=1)
    print(f"\n{theirs.describe()}\n{report.describe()[-1]}\nstop: {said}")
    assert said == [f"PID {pid}: owned by {second_user.name}, not yours; left alone"]
    assert _alive(pid)  # root could have killed it: it was not touched


def test_the_printed_command_stops_the_leftover_it_names(pids: list[int]) -> None:
    pid = int(subprocess.run(_titled("sglang::scheduler_TP6"), capture_output=True,
                             text=True, check=True).stdout)
    pids.append(pid)
    wait_until(lambda: pid in {o.pid for o in find_orphans().ours}, 30, "the leftover")
    (found,) = [o for o in find_orphans().orphans if o.pid == pid]
    printed = OrphanReport((found,)).stop_command
    shell = subprocess.run(["bash", "-c", printed], capture_output=True, text=True,
                           check=False)
    assert shell.returncode == 0, shell.stderr
    wait_until(lambda: not _alive(pid), 10, "the leftover stopped by the printed command")


def test_a_reused_pid_with_the_same_title_is_not_stopped(pids: list[int]) -> None:
    first = int(subprocess.run(_titled("sglang::scheduler_TP7"), capture_output=True,
                               text=True, check=True).stdout)
    pids.append(first)
    wait_until(lambda: first in {o.pid for o in find_orphans().ours}, 30, "the leftover")
    (seen,) = [o for o in find_orphans().orphans if o.pid == first]
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: procfs.read_stat(first) is None, 10, "the first process reaped")
    reused = _reuse(first, "sglang::scheduler_TP7")
    try:
        _not_stopped(seen, reused.pid)
    finally:
        reused.kill()
        reused.wait(timeout=10)


def _not_stopped(seen: Orphan, again: int) -> None:
    first = seen.pid
    assert again == first and _argv0(again) == "sglang::scheduler_TP7"  # same PID, same title
    assert still_the_same(seen) == "a different process now (another start time); left alone"
    said = stop_orphans(OrphanReport((seen,)), grace_s=1)
    printed = OrphanReport((seen,)).stop_command
    shell = subprocess.run(["bash", "-c", printed], capture_output=True, text=True,
                           check=False)
    print(f"\nleftover {seen.describe()}\nPID {first} reused under the same title\n"
          f"stop: {said}\nprinted command: {printed} (exit {shell.returncode})")
    assert said == [f"PID {first}: a different process now (another start time); left alone"]
    time.sleep(0.5)
    assert _alive(again)  # neither the API nor the printed command touched it


def _reuse(pid: int, title: str) -> subprocess.Popen[bytes]:
    """Start a process titled ``title`` that gets ``pid`` again (the kernel hands out the PID
    after ``ns_last_pid``; root only); skips when other processes keep taking it."""
    if os.geteuid() != 0 or not os.path.exists("/proc/sys/kernel/ns_last_pid"):
        pytest.skip("reusing a PID needs root and /proc/sys/kernel/ns_last_pid")
    for _ in range(50):
        with open("/proc/sys/kernel/ns_last_pid", "w") as last:
            last.write(str(pid - 1))
        child = subprocess.Popen(["bash", "-c", f'exec -a {title} "$0" -c "$1"',
                                  sys.executable, SLEEP], stdin=subprocess.DEVNULL)
        if child.pid == pid:
            wait_until(lambda: _argv0(pid) == title, 10, "the new process titled")
            return child
        child.kill()
        child.wait()
    pytest.skip(f"PID {pid} was taken by other processes 50 times")

"""Finding servers in the process table: by how they were launched, with their port and the
file their output goes to; ``eagle-tui sim`` is one, a watch that launched one is not."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.processes import kill_tree
from support.waiting import log_contains, wait_until

from eagle_tui.core.proc.discover import (
    discover_servers,
    find_server_pid,
    held_name,
    server_kind,
)
from eagle_tui.core.proc.probe import ProcessProbe
from eagle_tui.core.sim.launcher import free_port

PY = "/usr/bin/python3"


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        ([PY, "-m", "sglang.launch_server", "--model-path", "m", "--tp", "8"], "launch_server"),
        ([PY, "-u", "-X", "dev", "-m", "sglang.launch_server"], "launch_server"),
        (["/venv/bin/python3.11", "/venv/bin/sglang", "serve", "--model-path", "m"], "serve"),
        (["sglang", "serve", "--port", "30000"], "serve"),
        ([PY, "-m", "sglang_router.launch_router", "--worker-urls", "x"], "router"),
        ([PY, "-m", "sglang_router.launch_server", "--model-path", "m"], "router"),
        (["/usr/local/bin/sglang-router", "--port", "30000"], "router"),
        ([PY, "-m", "eagle_tui.core.sim", "--port", "1"], "sim"),
        (["/venv/bin/python", "/venv/bin/eagle-tui", "sim", "--port", "1"], "sim"),
        # not servers:
        (["eagle-tui", "watch", "--launch", "--", PY, "-m", "sglang.launch_server"], None),
        (["/venv/bin/eagle-tui", "demo"], None),
        (["sglang::scheduler"], None),
        ([PY, "-B", "-c", "from multiprocessing.resource_tracker import main;main(6)"], None),
        ([PY, "tests/support/portholder.py", "sglang.launch_server", "--port", "1"], None),
        ([], None),
    ],
)
def test_a_server_is_known_by_how_it_was_launched(argv: list[str], kind: str | None) -> None:
    assert server_kind(argv) == kind


@pytest.fixture
def eagle_tui_sim(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    """``eagle-tui sim --port P`` with its output redirected to a file, as a user runs it."""
    port = free_port()
    log = tmp_path / "sim.log"
    script = Path(sys.executable).with_name("eagle-tui")
    with open(log, "wb") as out:
        popen = subprocess.Popen(
            [str(script), "sim", "--port", str(port), "--time-scale", "0", "--tokens-per-s", "0"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        yield popen, port, log
    finally:
        kill_tree([popen.pid])
        popen.wait(timeout=10)


@pytest.mark.slow
def test_eagle_tui_sim_is_found_with_its_port_and_log_file(
    eagle_tui_sim: tuple[subprocess.Popen[bytes], int, Path],
) -> None:
    popen, port, log = eagle_tui_sim
    wait_until(log_contains(log, "Uvicorn running on"), 60, "the sim's port open")
    # Only this test process's own tree: other test workers run their own sims meanwhile.
    found = {s.pid: s for s in discover_servers(within=os.getpid())}
    assert popen.pid in found
    server = found[popen.pid]
    assert (server.kind, server.port) == ("sim", port)
    # read through what the process holds, never by its path again (issue 38 item 5)
    assert server.log_path is not None and server.log_path.parent == Path(f"/proc/{popen.pid}/fd")
    assert held_name(server.log_path) == str(log) and server.log_path.samefile(log)
    assert server.url is not None and server.url.public == f"http://127.0.0.1:{port}"
    assert find_server_pid(port) == popen.pid
    report = ProcessProbe(port=port, discover=True).probe()  # the probe finds it too
    assert report.process is not None and report.process.pid == popen.pid
    assert report.port is not None and report.port.held_by_server is True


@pytest.mark.slow
def test_a_scope_keeps_to_one_process_tree(
    eagle_tui_sim: tuple[subprocess.Popen[bytes], int, Path],
) -> None:
    popen, _, log = eagle_tui_sim
    wait_until(log_contains(log, "Uvicorn running on"), 60, "the sim's port open")
    assert [s.pid for s in discover_servers(within=popen.pid)] == [popen.pid]
    with subprocess.Popen(["sleep", "60"]) as elsewhere:
        try:
            assert discover_servers(within=elsewhere.pid) == []
        finally:
            elsewhere.kill()
    gone = elsewhere.pid
    assert discover_servers(within=gone) == []  # a root that has exited: nothing, no error


# -- by title (issue 20 item 10) --------------------------------------------------------------

SCRIPT_LAUNCHER = r"""
import socket, subprocess, sys, time
port = int(sys.argv[sys.argv.index("--port") + 1])
server = socket.socket()
server.bind(("127.0.0.1", port))
server.listen()
rank = subprocess.Popen(["bash", "-c", 'exec -a sglang::scheduler_TP0 "$0" -c "$1"',
                         sys.executable, "import time; time.sleep(600)"])
print(rank.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize(("argv", "kind"), [
    (["sglang::router", "", ""], "router"),  # sglang-router 0.3.2 after setproctitle
    (["sglang::router"], "router"),
    (["sglang::scheduler_TP0", "-c", "x"], None),  # a rank is part of a server, not one
])
def test_a_process_is_known_by_its_title_too(argv: list[str], kind: str | None) -> None:
    assert server_kind(argv) == kind


@pytest.mark.slow
def test_the_real_router_renamed_sglang_router_is_found_with_its_port() -> None:
    router_support = pytest.importorskip("support.router")
    if not router_support.router_installed():
        pytest.skip("sglang-router is not installed")
    with router_support.RouterProcess(["http://127.0.0.1:9"]) as router:
        router.wait_serving(60)
        pid = router._process.pid
        wait_until(lambda: Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sglang::"),
                   30, "the router's title set")
        found = {s.pid: s for s in discover_servers(within=os.getpid())}
        assert pid in found, [s.cmdline for s in found.values()]
        assert (found[pid].kind, found[pid].port) == ("router", router.port)
        # its arguments are gone (no --port), but the kernel says who listens there
        assert find_server_pid(router.port) == pid


@pytest.mark.slow
def test_a_server_started_by_a_script_is_found_through_its_ranks_titles() -> None:
    port = free_port()
    launcher = subprocess.Popen([sys.executable, "-c", SCRIPT_LAUNCHER, "--port", str(port)],
                                stdout=subprocess.PIPE, text=True)
    assert launcher.stdout is not None
    try:
        rank = int(launcher.stdout.readline())
        wait_until(lambda: Path(f"/proc/{rank}/cmdline").read_bytes().startswith(b"sglang::"),
                   30, "the rank's title set")
        found = {s.pid: s for s in discover_servers(within=os.getpid())}
        assert list(found) == [launcher.pid]  # the script, not its rank
        assert (found[launcher.pid].kind, found[launcher.pid].port) == ("launch_server", port)
    finally:
        kill_tree([launcher.pid])
        launcher.wait(timeout=10)
        launcher.stdout.close()

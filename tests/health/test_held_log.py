"""Issue 38 item 5 (a discovered server's log) and item 7 (the server's own ``--log-file``).

As the issue found it: ``diagnose`` and the Server view took a discovered server's log by
re-resolving the path of ``/proc/PID/fd/2`` (`` (deleted)`` stripped). The server's owner
had made that path a link to a root-only 0600 file, and root's diagnose bundle printed it;
made a FIFO after discovery, ``diagnose`` blocked forever; made ``/dev/zero``, it grew at
200 MB/s (``_tail`` read unbounded). Now the log is read through the descriptor the
process holds, and every tail is a bounded read of a regular file.

The server here is a real simulated server run by a real second user (``second_user``),
its stdout and stderr a file in that user's home; eagle-tui runs as root.
"""

from __future__ import annotations

import os
import resource
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.second_user import LocalUser
from support.waiting import wait_until

from eagle_tui.core.proc.discover import discover_servers, held_name
from eagle_tui.core.sim.launcher import SimProcess, free_port

pytestmark = pytest.mark.slow

FAST = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0")
SECRET = "ROOT-ONLY-0600-must-never-be-printed"
MEMORY_LIMIT = 3 << 30
"""Address space of the diagnosing process: an unbounded read of /dev/zero fails at it
(MemoryError) instead of filling the host's memory, a bounded one never comes near it."""


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A root-only file (0600, in a 0700 directory of root's)."""
    path = tmp_path / "root-only" / "secret"
    path.parent.mkdir(mode=0o700)
    path.write_text(f"{SECRET}\n")
    path.chmod(0o600)
    return path


SYSTEM_PYTHON = "/usr/bin/python3"
"""The second user cannot run the test's own interpreter (it lives under /root, 0700)."""
THEIR_SERVER = """
import http.server, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
print(f"[2026-01-01 00:00:00] server_args=ServerArgs(model_path='m', port={port})",
      file=sys.stderr, flush=True)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Health)
print("[2026-01-01 00:00:01] The server is fired up and ready to roll!", file=sys.stderr,
      flush=True)
server.serve_forever()
"""


@pytest.fixture
def their_server(second_user: LocalUser) -> Iterator[tuple[int, Path]]:
    """(PID, log path) of a server the second user runs (``python3 ~/sglang/launch_server.py
    --port P``, answering /health), its stderr and stdout a file of theirs."""
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"the second user needs an interpreter they may run ({SYSTEM_PYTHON})")
    log, script = second_user.home / "server.log", second_user.home / "sglang/launch_server.py"

    def write_script() -> None:
        script.parent.mkdir()
        script.write_text(THEIR_SERVER)

    second_user.act(write_script)
    argv = [SYSTEM_PYTHON, str(script), "--port", str(free_port())]
    command = f"exec {shlex.join(argv)} >>{shlex.quote(str(log))} 2>&1"
    process = second_user.popen(["sh", "-c", command])
    wait_until(lambda: log.exists() and "fired up and ready" in log.read_text(), 60,
               "the second user's server ready")
    assert log.stat().st_uid == second_user.uid
    yield process.pid, log


SWAPS: dict[str, Callable[[Path, Path], None]] = {
    "link to a root-only file": lambda log, secret: (log.unlink(), log.symlink_to(secret)),
    "FIFO": lambda log, secret: (log.unlink(), os.mkfifo(log)),
    "/dev/zero": lambda log, secret: (log.unlink(), log.symlink_to("/dev/zero")),
}

DIAGNOSE_AFTER_DISCOVERY = """
import asyncio, sys
from eagle_tui.core.health.diagnose import Target, collect, resolve
target = resolve(Target(pid=int(sys.argv[1])))
print("discovered", target.log, flush=True)
sys.stdin.readline()  # the owner swaps the log's path now
bundle = asyncio.run(collect(target, take_stacks=False))
print("\\n".join(bundle.lines()), flush=True)
"""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


@pytest.mark.parametrize("swap", list(SWAPS))
def test_a_log_path_swapped_after_discovery_is_never_followed(
        second_user: LocalUser, their_server: tuple[int, Path], secret: Path,
        swap: str) -> None:
    pid, log = their_server
    child = subprocess.Popen([sys.executable, "-c", DIAGNOSE_AFTER_DISCOVERY, str(pid)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, preexec_fn=_limit_memory)
    try:
        assert child.stdout is not None and child.stdin is not None
        found = child.stdout.readline()
        second_user.act(lambda: SWAPS[swap](log, secret))
        child.stdin.write("\n")
        child.stdin.flush()
        out, err = child.communicate(timeout=120)  # a FIFO read blocked here forever
    except subprocess.TimeoutExpired:
        pytest.fail(f"diagnose still running 120 s after the log became a {swap}")
    finally:
        child.kill()
        child.wait()
    print(f"{swap}: exit {child.returncode}")
    print("\n".join(line for line in out.splitlines() if line.startswith("url ")))
    assert child.returncode == 0, err[-2000:]
    assert SECRET not in out and "Traceback" not in err
    assert found.startswith("discovered /proc/"), found  # the held file, not its path
    tail = out.split("== last log lines", 1)[1].split("== processes", 1)[0]
    assert "fired up and ready" in tail  # the server's own log, read through its descriptor
    assert f"{log} (deleted) (read through /proc/{pid}/fd/" in out


def test_root_diagnose_prints_the_held_log_not_the_link(
        second_user: LocalUser, their_server: tuple[int, Path], secret: Path) -> None:
    """The issue's run: the owner swapped the path before root's ``diagnose --pid``."""
    pid, log = their_server
    second_user.act(lambda: SWAPS["link to a root-only file"](log, secret))
    done = subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", "diagnose", "--pid",
                           str(pid), "--no-stacks"], capture_output=True, text=True,
                          timeout=120, preexec_fn=_limit_memory)
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout and "fired up and ready" in done.stdout
    print(next(line for line in done.stdout.splitlines() if line.startswith("url ")))


def test_discovery_takes_the_servers_own_log_file_over_its_redirected_output(
        tmp_path: Path) -> None:
    """Item 7: a server started with ``--log-file L`` and its stdout/stderr sent to R logs
    to L; R holds at most a stray line. Discovery used to take R."""
    own = tmp_path / "own.log"
    redirected = tmp_path / "redirected.log"
    with SimProcess([*FAST, "--log-file", str(own)], log_path=redirected) as sim:
        wait_until(lambda: own.exists() and "fired up and ready" in own.read_text(), 60,
                   "the sim's own log says ready")
        found = {s.pid: s for s in discover_servers(within=os.getpid())}
        server = found[sim.pid]
        assert server.log_path is not None
        print(f"--log-file {own}, stdout/stderr {redirected}: discovered "
              f"{held_name(server.log_path)} (read through {server.log_path})")
        assert held_name(server.log_path) == str(own)
        assert server.log_path.samefile(own)


def test_the_server_views_log_is_the_held_file(
        second_user: LocalUser, their_server: tuple[int, Path], secret: Path) -> None:
    """The Server view's target of a discovered server follows the held file too: after
    the owner swaps the path to a link, its log pane still reads the server's lines."""
    from eagle_tui.core.serverlog.follower import LogFollower
    from eagle_tui.tui.sources.server import target_of

    pid, log = their_server
    server = next(s for s in discover_servers() if s.pid == pid)
    target = target_of(server)
    assert not server.mine and target.log_file == server.log_path
    second_user.act(lambda: SWAPS["link to a root-only file"](log, secret))
    with LogFollower(target.log_file, from_start=True) as follower:
        chunk = follower.read()
    assert chunk.error is None and any("fired up and ready" in line for line in chunk.lines)
    assert not any(SECRET in line for line in chunk.lines)

"""py-spy against real processes: a stack through a real library (filelock waiting on a lock
another process holds), a stopped process read without pausing, and every way a dump fails
returned as data: no ptrace permission (py-spy run as another user), not Python, gone, too
slow, no binary."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.processes import kill_tree
from support.waiting import wait_until

from eagle_tui.core.proc import pyspy
from eagle_tui.core.proc.stacks import classify
from eagle_tui.core.proc.stuckpoints import Point

pytestmark = pytest.mark.slow

WAITER = """
import sys
from filelock import FileLock
print("waiting", flush=True)
with FileLock(sys.argv[1]):
    pass
"""
SLEEPER = "import time\nprint('up', flush=True)\ntime.sleep(600)"


@pytest.fixture
def spawn() -> Iterator[object]:
    started: list[subprocess.Popen[str]] = []

    def start(*argv: str) -> subprocess.Popen[str]:
        popen = subprocess.Popen(list(argv), stdout=subprocess.PIPE, text=True)
        started.append(popen)
        assert popen.stdout is not None and popen.stdout.readline()
        return popen

    yield start
    for popen in started:
        if popen.poll() is None:
            os.kill(popen.pid, signal.SIGCONT)
        kill_tree([popen.pid])
        popen.wait(timeout=10)
        if popen.stdout is not None:
            popen.stdout.close()


def test_py_spy_is_found_beside_the_interpreter() -> None:
    found = pyspy.find_pyspy()
    assert found is not None and Path(found).parent == Path(sys.executable).parent


def test_a_rank_waiting_on_a_held_file_lock_reads_as_waiting_on_a_file_lock(
    spawn: object, tmp_path: Path
) -> None:
    from filelock import FileLock

    lock = FileLock(tmp_path / "jit.lock")
    with lock:
        waiter = spawn(sys.executable, "-c", WAITER, str(tmp_path / "jit.lock"))  # type: ignore[operator]

        def in_acquire() -> bool:
            stack = pyspy.dump(waiter.pid)
            place = classify(stack)
            return place is not None and place.point is Point.FILE_LOCK

        wait_until(in_acquire, 30, "the waiter inside FileLock.acquire")
        stack = pyspy.dump(waiter.pid)
        assert stack.ok and not stack.nonblocking and stack.main is not None
        place = classify(stack)
        assert place is not None and place.frame is not None
        assert "filelock/" in place.frame.filename and place.waiting and place.stuck
        assert place.detail == "jit.lock"  # filelock keeps the path in its locals


def test_a_stopped_process_is_read_without_pausing_it_and_stays_stopped(spawn: object) -> None:
    sleeper = spawn(sys.executable, "-c", SLEEPER)  # type: ignore[operator]
    os.kill(sleeper.pid, signal.SIGSTOP)
    wait_until(lambda: _state(sleeper.pid) == "T", 10, "stopped")
    stack = pyspy.dump(sleeper.pid)
    assert stack.ok and stack.nonblocking
    assert stack.main is not None and stack.main.frames[-1].function == "<module>"
    assert _state(sleeper.pid) == "T"
    forced = pyspy.dump(sleeper.pid, nonblocking=False)  # pausing fails, the retry does not
    assert forced.ok and forced.nonblocking


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root")
def test_no_ptrace_permission_is_a_result_with_the_fix(spawn: object, tmp_path: Path) -> None:
    sleeper = spawn(sys.executable, "-c", SLEEPER)  # type: ignore[operator]
    binary = pyspy.find_pyspy()
    assert binary is not None
    as_nobody = tmp_path / "py-spy-as-nobody"
    as_nobody.write_text(
        f'#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups {binary} "$@"\n'
    )
    as_nobody.chmod(0o755)
    stack = pyspy.dump(sleeper.pid, pyspy=str(as_nobody))
    assert stack.status is pyspy.DumpStatus.NO_PERMISSION and not stack.threads
    assert "Permission Denied" in stack.message
    assert "--cap-add SYS_PTRACE" in stack.fix and "server's user" in stack.fix


def test_every_other_failure_is_a_typed_result(spawn: object) -> None:
    native = subprocess.Popen(["sleep", "600"])
    try:
        wait_until(lambda: Path(f"/proc/{native.pid}/exe").resolve().name != "python3", 10, "exec")
        assert pyspy.dump(native.pid).status is pyspy.DumpStatus.NOT_PYTHON
    finally:
        native.kill()
        native.wait()
    assert pyspy.dump(native.pid).status is pyspy.DumpStatus.GONE
    sleeper = spawn(sys.executable, "-c", SLEEPER)  # type: ignore[operator]
    slow = pyspy.dump(sleeper.pid, timeout_s=0.001)
    assert slow.status is pyspy.DumpStatus.TIMEOUT and "gave no stack" in slow.message
    missing = pyspy.dump(sleeper.pid, pyspy="/nonexistent/py-spy")
    assert missing.status is pyspy.DumpStatus.FAILED and "cannot run" in missing.message
    assert _state(sleeper.pid) in ("S", "R")  # nothing left it paused


RETRYING = """
import time
def wait_for_the_other_side():
    print("up", flush=True)
    while True:
        time.sleep(0.5)
wait_for_the_other_side()
"""


def test_a_frame_the_catalogue_does_not_know_sleeping_reads_as_a_retry_loop(
    spawn: object,
) -> None:
    from eagle_tui.core.proc import blocked

    sleeper = spawn(sys.executable, "-c", RETRYING)  # type: ignore[operator]

    def sleeping() -> bool:
        wait = blocked.look(sleeper.pid)
        return wait is not None and wait.syscall == "clock_nanosleep"

    wait_until(sleeping, 10, "the sleep")
    place = classify(pyspy.dump(sleeper.pid), "clock_nanosleep")
    assert place is not None and place.point is Point.RETRY_SLEEP and place.stuck
    assert place.function == "wait_for_the_other_side"
    assert classify(pyspy.dump(sleeper.pid), "futex").point is Point.UNKNOWN  # type: ignore[union-attr]

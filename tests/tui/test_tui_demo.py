"""``eagle-tui demo``: paints before its server is up, runs a batch on the simulated server,
and leaves nothing behind however it ends: ``q``, or a SIGHUP (an SSH drop), SIGINT or
SIGKILL at a random moment (no process, port, batch record or run directory is left)."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import pty
import random
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from support.waiting import poll_until
from textual.worker import WorkerState
from tui_fakes import wait_for

from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.health.phase import Phase
from eagle_tui.tui.demo import DemoApp, StoppingScreen, prepare_demo
from eagle_tui.tui.demokeeper import MARKER_ENV
from eagle_tui.tui.widgets.server_card import ServerCard

pytestmark = pytest.mark.slow


def demo_args() -> argparse.Namespace:
    return argparse.Namespace(
        time_scale=0.0,
        prompts=20,
        tokens_per_s=0.0,
        theme="eagle-dark",
        no_mouse=False,
        keep=False,
        log_level="INFO",
        refresh=None,
        rank_hang=None,
    )


@pytest.fixture
def no_marker() -> Iterator[None]:
    """The demo marks this process's environment: remove the mark after the test."""
    yield
    os.environ.pop(MARKER_ENV, None)


async def test_demo_runs_a_batch_on_the_sim_and_q_cleans_up(no_marker: None) -> None:
    args = demo_args()
    demo = prepare_demo(args)
    app = DemoApp(demo, args)
    async with app.run_test(size=(120, 40)) as pilot:
        card = app.screen.query_one(ServerCard)
        assert not demo.server_started.is_set() or card.snapshot is None  # painted first
        await wait_for(
            pilot,
            lambda: card.snapshot is not None and card.snapshot.phase == Phase.READY,
            120,
            "demo server ready",
        )
        assert app.screen.check_action("restart_server", ()) is True  # managed
        capture = app.sources.capture
        assert capture is not None
        await wait_for(
            pilot,
            lambda: bool(capture.batches()) and capture.batches()[0].state == "done",
            120,
            "demo batch finished",
        )
        progress = capture.batches()[0].progress
        assert progress is not None and progress.counts.done == 20
        pid = demo.server.pid
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, StoppingScreen), 5, "stopping")
        stopping = app.stopping
    # Quitting waits QUIT_WAIT_S for the keeper's "clean", then gives the screen back; on a
    # loaded machine the keeper may finish after that, which is by design: wait for it.
    assert pid is not None
    poll_until(lambda: cleaned_up(pid, demo.workdir), 30, every=0.1)
    # its worker then tells an app that is gone, and must end quietly (a CancelledError
    # from Textual escaped once, and pytest blamed whichever test ran next): done, or
    # cancelled by the exit it asked for, never failed
    assert stopping is not None
    poll_until(lambda: stopping.is_finished, 30)
    assert stopping.state in (WorkerState.SUCCESS, WorkerState.CANCELLED), stopping.error
    assert Registry().all() == []  # the demo's record is gone with its files
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not demo.workdir.exists()


def cleaned_up(pid: int, workdir: Path) -> bool:
    """The keeper's work is done: no record, no server, no run directory."""
    with contextlib.suppress(psutil.Error):
        if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
            return False
    return not Registry().all() and not workdir.exists()


# -- killed at a random moment ----------------------------------------------------------------


def spawn_demo(state: Path) -> tuple[subprocess.Popen[bytes], int]:
    env = {**os.environ, "EAGLE_TUI_STATE_DIR": str(state), "EAGLE_TUI_CONFIG_DIR": str(state),
           "TERM": "xterm-256color"}
    env.pop(MARKER_ENV, None)
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "eagle_tui.tui.cli", "demo", "--time-scale", "0.1"],
        stdin=secondary, stdout=secondary, stderr=secondary, env=env,
        preexec_fn=controlling_terminal,  # as under sshd: closing it sends SIGHUP
    )
    os.close(secondary)
    return process, primary


def controlling_terminal() -> None:
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def ours(state: Path) -> list[psutil.Process]:
    """Every process started for the demo under ``state`` (they all inherit its env)."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if process.environ().get("EAGLE_TUI_STATE_DIR") == str(state):
                found.append(process)
    return found


def sim_ports(state: Path) -> set[int]:
    ports = set()
    for process in ours(state):
        with contextlib.suppress(psutil.Error):
            match = re.search(r"core\.sim --port (\d+)", " ".join(process.cmdline()))
            if match:
                ports.add(int(match.group(1)))
    return ports


def drain(primary: int, seconds: float, state: Path, ports: set[int]) -> None:
    """Read the demo's terminal for ``seconds`` (noting its server's port)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 0.05)
        if ready:
            with contextlib.suppress(OSError):
                os.read(primary, 65536)
        ports |= sim_ports(state)


def leftovers(state: Path) -> list[str]:
    alive = [described for p in ours(state) if (described := alive_process(p))]
    return (alive
            + [f"record {p.name}" for p in (state / "batches").glob("*.json")]
            + [f"run dir {p.name}" for p in (state / "demo").glob("run-*")])


def alive_process(process: psutil.Process) -> str:
    """``process PID CMDLINE`` while it runs; "" once it exited (even if not yet reaped: it
    may turn into a zombie between any two questions asked of it)."""
    try:
        if process.status() == psutil.STATUS_ZOMBIE:
            return ""
        return f"process {process.pid} {' '.join(process.cmdline())[:80]}"
    except psutil.Error:
        return ""


def port_free(port: int) -> bool:
    """Nobody listens on ``port`` (TIME_WAIT leftovers of closed connections do not count:
    a server binds with SO_REUSEADDR)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


WINDOWS = [(0.0, 1.0), (1.0, 3.0), (3.0, 7.0)]
"""Before the first paint and while the server starts; while the batch starts; capturing."""


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"{w[0]:g}-{w[1]:g}s")
@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGINT, signal.SIGKILL, 0],
                         ids=lambda s: signal.Signals(s).name if s else "terminal-closed")
def test_a_demo_killed_at_any_moment_leaves_nothing(
    tmp_path: Path, signum: int, window: tuple[float, float]
) -> None:
    """``terminal-closed``: the pseudo-terminal's other end is closed, as when an SSH
    connection drops (the kernel sends SIGHUP and the terminal is gone)."""
    moment = random.uniform(*window)  # named in every failure message
    state = tmp_path / "state"
    process, primary = spawn_demo(state)
    ports: set[int] = set()
    try:
        drain(primary, moment, state, ports)
        if signum:
            process.send_signal(signum)
        else:
            os.close(primary)
            primary = os.open(os.devnull, os.O_RDONLY)  # keeps the clean-up below simple
        def demo_exited() -> bool:
            drain(primary, 0.05, state, ports)  # reading its terminal meanwhile
            return process.poll() is not None

        assert poll_until(demo_exited, 10, every=0), \
            f"the demo did not exit after {signum} at {moment}"
        poll_until(lambda: not leftovers(state), 10, every=0.05)
        assert leftovers(state) == [], f"left after signal {signum} at {moment:.2f} s"
        assert all(port_free(port) for port in ports), f"port still held: {ports}"
    finally:
        for child in ours(state):
            with contextlib.suppress(psutil.Error):
                child.kill()
        if process.poll() is None:
            process.kill()
        process.wait()
        os.close(primary)


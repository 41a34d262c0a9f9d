"""`--rank-hang fifo` leaves nothing in the temporary directory (issue 39 item 4): the rank
blocks opening a named pipe for as long as the server lives, and the pipe's directory goes
once the rank has gone, whether the demo quits (a real demo on a pseudo-terminal,
tests/support/terminal.py, quit with the key a person presses) or the sim is killed."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import psutil
import pytest
from support.terminal import PtyTerminal
from support.waiting import wait_until

from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.sim.lifecycle.hangs import RANK_TITLE

pytestmark = pytest.mark.slow

FIFO_WAITS = ("wait_for_partner", "fifo_open")


def blocked_rank(marker: str, value: str) -> psutil.Process | None:
    """The rank whose environment has ``marker=value``, once it sleeps on the FIFO."""
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if (process.environ().get(marker) == value
                    and process.cmdline()[:1] == [RANK_TITLE]
                    and Path(f"/proc/{process.pid}/wchan").read_text().strip() in FIFO_WAITS):
                return process
    return None


def fifo_dirs(temp: Path) -> list[Path]:
    return list(temp.glob("eagle-sim-model-fifo-*"))


def gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_the_fifo_directory_is_gone_after_the_demo_quits(tmp_path: Path) -> None:
    state, temp = tmp_path / "state", tmp_path / "tmp"
    temp.mkdir()
    env = {"EAGLE_TUI_STATE_DIR": str(state), "EAGLE_TUI_CONFIG_DIR": str(state),
           "TMPDIR": str(temp)}
    with PtyTerminal(["demo", "--rank-hang", "fifo", "--time-scale", "0.1"], env=env) as term:
        term.wait_for("1 Server")
        wait_until(lambda: blocked_rank("EAGLE_TUI_STATE_DIR", str(state)) is not None, 120,
                   "the rank blocked on its pipe")
        [folder] = fifo_dirs(temp)  # there while the rank waits on it
        assert (folder / "model.safetensors").is_fifo()
        term.wait_for("model.safetensors", timeout=120)  # the verdict names the file
        term.press("q")
        term.wait_until(lambda: term.alive() is not None, "the demo quit")
    wait_until(lambda: not fifo_dirs(temp), 30, "the FIFO directory removed")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_the_fifo_directory_is_gone_however_the_sim_ends(tmp_path: Path, signum: int) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp), "EAGLE_TEST_FIFO_RUN": str(tmp_path)}
    with SimProcess(["--time-scale", "0.05", "--rank-hang", "fifo"], env=env) as sim:
        wait_until(lambda: blocked_rank("EAGLE_TEST_FIFO_RUN", str(tmp_path)) is not None,
                   120, "the rank blocked on its pipe")
        rank = blocked_rank("EAGLE_TEST_FIFO_RUN", str(tmp_path))
        assert rank is not None and len(fifo_dirs(temp)) == 1
        os.kill(sim.pid, signum)
        wait_until(lambda: gone(rank), 30, "the rank ended with its sim")
        wait_until(lambda: not fifo_dirs(temp), 30, "the FIFO directory removed")

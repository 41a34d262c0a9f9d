"""Helpers for tests that need real processes: spawn port holders, wait for exits, clean up.

The ``port_holders`` fixture (tests/conftest.py) is built on these.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from support.waiting import wait_exit

PORTHOLDER = Path(__file__).with_name("portholder.py")
FAKE_MODULES = Path(__file__).with_name("fakemods")  # a stand-in ``sglang`` package


@dataclass
class Holder:
    """A spawned port holder: its Popen, the port it bound, its child PIDs."""

    popen: subprocess.Popen[str]
    port: int
    children: list[int] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.popen.pid


def spawn_holder(*args: str, module: str | None = None) -> Holder:
    """Start ``portholder.py`` and wait (on its stdout, not a timer) until it listens.

    ``module="sglang.launch_server"`` starts it as ``python -m sglang.launch_server ARGS``,
    so the process table sees a server launched the way SGLang is.
    """
    command = [sys.executable, str(PORTHOLDER), *args]
    env = None
    if module is not None:
        command = [sys.executable, "-m", module, *args]
        env = {**os.environ, "PYTHONPATH": str(FAKE_MODULES)}
    popen = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert popen.stdout is not None
    line = popen.stdout.readline().split()
    if not line or line[0] != "READY":
        popen.kill()
        popen.wait()
        popen.stdout.close()
        raise AssertionError(f"port holder failed to start: {line}")
    return Holder(popen, int(line[1]), [int(p) for p in line[2:]])


def kill_tree(pids: list[int]) -> None:
    """SIGKILL every PID (and its descendants) still alive; wait for them."""
    procs = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            procs += [proc, *proc.children(recursive=True)]
        except psutil.Error:
            continue
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            continue
    for proc in procs:
        wait_exit(proc.pid, 5)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(proc.pid, os.WNOHANG)  # reap it if it was our child


def reap(holder: Holder) -> None:
    """Kill a holder's tree and release its Popen resources."""
    kill_tree([holder.pid, *holder.children])
    holder.popen.wait(timeout=5)
    if holder.popen.stdout is not None:
        holder.popen.stdout.close()

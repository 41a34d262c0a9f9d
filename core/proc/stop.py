"""Stop a server's process tree safely: the step whose absence made restarts fail silently.

SIGTERM the main process (SGLang drains and takes its ranks down), wait for the whole tree
to exit, SIGKILL whatever is left after a timeout, then wait until the port and (where
visible) GPU memory are released. Only then is it safe to start the next server: if the
old one still holds the port, the new one loads every weight and then dies at bind time.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil

from eagle_tui.core.clock import Clock, SystemClock
from eagle_tui.core.proc.gpu import read_gpus
from eagle_tui.core.proc.ports import port_status


@dataclass(frozen=True)
class StopReport:
    """How a stop went. ``port_released``/``gpu_released`` are None when not checked."""

    pid: int
    stopped: bool
    escalated: bool
    port_released: bool | None
    gpu_released: bool | None
    steps: tuple[str, ...]
    elapsed_s: float

    @property
    def clear(self) -> bool:
        """True when the tree is gone and nothing it held is still held."""
        return self.stopped and self.port_released is not False and self.gpu_released is not False


@dataclass(frozen=True)
class StopTimeouts:
    """Seconds to wait after SIGTERM, after SIGKILL, and for port/GPU release."""

    term_s: float = 60.0
    kill_s: float = 10.0
    release_s: float = 30.0
    poll_s: float = 0.1


class _Stopper:
    def __init__(self, pid: int, clock: Clock, timeouts: StopTimeouts, reap: Callable[[], Any]):
        self.pid = pid
        self.clock = clock
        self.timeouts = timeouts
        self.reap = reap
        self.started = clock.monotonic()
        self.steps: list[str] = []
        self.tree: dict[int, Any] = {}

    def note(self, text: str) -> None:
        self.steps.append(f"+{self.clock.monotonic() - self.started:.1f}s {text}")

    def collect(self) -> None:
        try:
            main = psutil.Process(self.pid)
            self.tree[self.pid] = main
            for child in main.children(recursive=True):
                self.tree.setdefault(child.pid, child)
        except psutil.Error:
            pass

    def survivors(self) -> list[Any]:
        self.reap()
        alive = []
        for proc in list(self.tree.values()):
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
                    for child in proc.children(recursive=True):
                        self.tree.setdefault(child.pid, child)  # spawned while stopping
            except psutil.Error:
                continue
        return alive

    async def wait_until(self, done: Callable[[], bool], timeout: float) -> bool:
        deadline = self.clock.monotonic() + timeout
        while not done():
            if self.clock.monotonic() >= deadline:
                return False
            await self.clock.sleep(self.timeouts.poll_s)
        return True

    def signal_all(self, procs: list[Any], sig: signal.Signals) -> None:
        for proc in procs:
            try:
                proc.send_signal(sig)
            except psutil.Error:
                continue


async def stop_process_tree(
    pid: int,
    *,
    port: int | None = None,
    timeouts: StopTimeouts | None = None,
    clock: Clock | None = None,
    reap: Callable[[], Any] | None = None,
) -> StopReport:
    """SIGTERM ``pid``, wait for its tree, SIGKILL leftovers, wait for port and GPU release.

    ``reap`` is called while waiting so a child of ours does not linger as a zombie
    (pass ``ManagedServer.exit_code`` or ``Popen.poll``).
    """
    stopper = _Stopper(
        pid, clock or SystemClock(), timeouts or StopTimeouts(), reap or (lambda: None)
    )
    stopper.collect()
    escalated = await _terminate(stopper)
    stopped = not stopper.survivors()
    port_ok = await _wait_port(stopper, port) if port is not None else None
    gpu_ok = await _wait_gpu(stopper)
    return StopReport(
        pid=pid,
        stopped=stopped,
        escalated=escalated,
        port_released=port_ok,
        gpu_released=gpu_ok,
        steps=tuple(stopper.steps),
        elapsed_s=stopper.clock.monotonic() - stopper.started,
    )


async def _terminate(stopper: _Stopper) -> bool:
    if not stopper.survivors():
        stopper.note(f"PID {stopper.pid} was not running")
        return False
    stopper.signal_all([stopper.tree[stopper.pid]], signal.SIGTERM)
    stopper.note(f"SIGTERM to PID {stopper.pid} ({len(stopper.tree)} processes in its tree)")
    if await stopper.wait_until(lambda: not stopper.survivors(), stopper.timeouts.term_s):
        stopper.note("process tree exited")
        return False
    left = stopper.survivors()
    stopper.note(
        f"still alive after {stopper.timeouts.term_s:.0f}s: PIDs "
        f"{', '.join(str(p.pid) for p in left)}; SIGKILL"
    )
    stopper.signal_all(left, signal.SIGKILL)
    if await stopper.wait_until(lambda: not stopper.survivors(), stopper.timeouts.kill_s):
        stopper.note("process tree killed")
    else:
        stopper.note("processes survived SIGKILL (uninterruptible sleep in the driver?)")
    return True


async def _wait_port(stopper: _Stopper, port: int) -> bool:
    def free() -> bool:
        try:
            return not port_status(port).bound
        except (psutil.Error, OSError):
            return True  # cannot see the table: do not block the restart on it

    released = await stopper.wait_until(free, stopper.timeouts.release_s)
    stopper.note(f"port {port} {'released' if released else 'still held'}")
    return released


async def _wait_gpu(stopper: _Stopper) -> bool | None:
    if not read_gpus().available:
        return None
    pids = set(stopper.tree)

    def free() -> bool:
        report = read_gpus()
        return not any(p.pid in pids for d in report.devices for p in d.processes)

    released = await stopper.wait_until(free, stopper.timeouts.release_s)
    stopper.note(f"GPU memory {'released' if released else 'still held'} by the old tree")
    return released

"""Immutable results of probing processes, ports and GPUs."""

from __future__ import annotations

import signal
from dataclasses import dataclass


@dataclass(frozen=True)
class ChildInfo:
    """One child process of the server (a TP rank, the detokenizer, …)."""

    pid: int
    name: str
    alive: bool
    cpu_percent: float | None = None


@dataclass(frozen=True)
class ProcessReport:
    """The server process and its children at one moment.

    ``exit_code`` is known only for a process eagle-tui launched itself (negative: killed
    by that signal). ``children_lost`` are children seen earlier that have exited since.
    ``cpu_percent`` sums the process and its children (100 = one core busy).
    """

    pid: int
    alive: bool
    status: str
    name: str = ""
    cmdline: str = ""
    create_time: float | None = None
    exit_code: int | None = None
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    children: tuple[ChildInfo, ...] = ()
    children_lost: tuple[ChildInfo, ...] = ()

    @property
    def tree_pids(self) -> frozenset[int]:
        """The process and every child still known."""
        return frozenset({self.pid, *(c.pid for c in self.children)})

    def describe_exit(self) -> str:
        """``exited with code 1`` / ``killed by SIGKILL (-9)`` / ``exited (code unknown)``."""
        if self.exit_code is None:
            return "exited (exit code unknown: not a child of eagle-tui)"
        if self.exit_code < 0:
            return f"killed by {signal_name(-self.exit_code)} ({self.exit_code})"
        return f"exited with code {self.exit_code}"


@dataclass(frozen=True)
class PortStatus:
    """Whether a TCP port is listening, and who holds it.

    ``held_by_server`` is True when the holder is the watched server's process tree, False
    when it is another process, None when that cannot be told (no server PID known, or the
    holder's PID is hidden).
    """

    port: int
    bound: bool
    holder_pid: int | None = None
    holder_name: str = ""
    holder_cmdline: str = ""
    held_by_server: bool | None = None

    def describe_holder(self) -> str:
        """``PID 123 (python -m sglang.launch_server …)`` or ``an unknown process``."""
        if self.holder_pid is None:
            return "a process whose PID is hidden from us"
        what = " ".join((self.holder_cmdline or self.holder_name).split())
        return f"PID {self.holder_pid} ({_clip(what, 100)})" if what else f"PID {self.holder_pid}"


@dataclass(frozen=True)
class ProbeReport:
    """One probe: the server process (None when not found yet), its port, and problems."""

    process: ProcessReport | None
    port: PortStatus | None
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class GpuProcess:
    """A process holding memory on a GPU."""

    pid: int
    used_bytes: int | None


@dataclass(frozen=True)
class GpuDevice:
    """One GPU's memory and the processes holding it."""

    index: int
    name: str
    used_bytes: int
    total_bytes: int
    processes: tuple[GpuProcess, ...] = ()
    utilization_percent: int | None = None
    """Compute busy time over NVML's last sample period (None when it cannot say)."""


@dataclass(frozen=True)
class GpuReport:
    """All GPUs, or ``available=False`` with the reason (then the panel says so)."""

    available: bool
    reason: str = ""
    devices: tuple[GpuDevice, ...] = ()


NO_GPU_INFO = "no GPU information"


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal 77`` when the number has no name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"

"""GPUs as the Server view's GPU panel shows them (pure: no widgets, no I/O).

One line per GPU: memory used of total with a bar, utilisation, and the processes holding
memory, each marked as the watched server's (its PID or a child) or another process: a
start-up racing the previous server's memory release shows as memory held by a PID that
is not the server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eagle_tui.core.proc.report import GpuDevice, GpuReport, ProcessReport

BAR_CELLS = 10
GB = 1e9


def server_pids(process: ProcessReport | None) -> frozenset[int]:
    """The server's PID and its children's."""
    if process is None:
        return frozenset()
    return frozenset({process.pid, *(child.pid for child in process.children)})


def gpu_line(device: GpuDevice, ours: frozenset[int]) -> str:
    """``GPU0 H100  ██████░░░░ 61.2/80.0 GB  util 97%  holders: server 4242 60.1 GB, other
    999 1.1 GB``."""
    fraction = device.used_bytes / device.total_bytes if device.total_bytes else 0.0
    filled = round(max(0.0, min(1.0, fraction)) * BAR_CELLS)
    bar = "█" * filled + "░" * (BAR_CELLS - filled)
    util = "util ?" if device.utilization_percent is None else (
        f"util {device.utilization_percent}%"
    )
    memory = f"{device.used_bytes / GB:.1f}/{device.total_bytes / GB:.1f} GB"
    holders = ", ".join(
        f"{'server' if p.pid in ours else 'OTHER'} {p.pid}"
        + (f" {p.used_bytes / GB:.1f} GB" if p.used_bytes is not None else "")
        for p in device.processes
    )
    return f"GPU{device.index} {device.name}  {bar} {memory}  {util}  " + (
        f"held by {holders}" if holders else "no process holds memory"
    )


def gpu_lines(report: GpuReport | None, process: ProcessReport | None) -> list[str]:
    """The panel's lines ([] when there is nothing to show beyond the card's note)."""
    if report is None or not report.available or not report.devices:
        return []
    ours = server_pids(process)
    return [gpu_line(device, ours) for device in report.devices]


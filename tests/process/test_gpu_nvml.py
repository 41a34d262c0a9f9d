"""GPU reading through NVML: a fake NVML with two GPUs (one holding a foreign process's
memory), and this machine's real state (no NVIDIA driver: said plainly, nothing raised)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from eagle_tui.core.proc import gpu
from eagle_tui.core.proc.report import GpuReport


class FakeNvml:
    """Just the NVML calls ``core.proc.gpu`` makes."""

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(used=(60 + handle) * 10**9, total=80 * 10**9)

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[SimpleNamespace]:
        holders = [SimpleNamespace(pid=4242, usedGpuMemory=59 * 10**9)]
        if handle == 1:
            holders.append(SimpleNamespace(pid=999, usedGpuMemory=2 * 10**9))
        return holders

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        if handle == 1:
            raise RuntimeError("not supported")
        return SimpleNamespace(gpu=97, memory=40)


def test_read_gpus_reports_memory_utilisation_and_holders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu, "_nvml", FakeNvml())
    report = gpu.read_gpus()
    assert report.available and [d.index for d in report.devices] == [0, 1]
    first, second = report.devices
    assert (first.name, first.used_bytes, first.utilization_percent) == (
        "NVIDIA H100 80GB HBM3",
        60 * 10**9,
        97,
    )
    assert second.utilization_percent is None  # unsupported: unknown, not an error
    assert [p.pid for p in second.processes] == [4242, 999]


def test_without_a_driver_it_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu, "_nvml", None)
    monkeypatch.setattr(gpu, "_init_error", None)
    report = gpu.read_gpus()  # this machine: nvidia-ml-py installed, no NVIDIA driver
    if report.available:
        pytest.skip("this machine has an NVIDIA driver")
    assert report == GpuReport(False, report.reason)
    assert "no NVIDIA driver" in report.reason and "not installed" not in report.reason

"""GPU memory and the processes holding it, through NVML when it is there.

``pynvml`` (package ``nvidia-ml-py``, a dependency: pure Python) needs the NVIDIA driver's
library at run time: without it (no NVIDIA driver), or without the package, every call
returns ``GpuReport(available=False, reason=…)`` and nothing breaks.
"""

from __future__ import annotations

from typing import Any

from eagle_tui.core.proc.report import NO_GPU_INFO, GpuDevice, GpuProcess, GpuReport

_nvml: Any = None
_init_error: str | None = None


def _load_nvml() -> Any:
    """Import and initialise NVML once; remember why it failed if it did."""
    global _nvml, _init_error
    if _nvml is not None or _init_error is not None:
        return _nvml
    try:
        import pynvml

        pynvml.nvmlInit()
        _nvml = pynvml
    except ImportError:
        _init_error = f"{NO_GPU_INFO} (pynvml not installed: pip install nvidia-ml-py)"
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, …
        _init_error = f"{NO_GPU_INFO}: no NVIDIA driver ({exc})"
    return _nvml


def read_gpus() -> GpuReport:
    """Every GPU's memory use and holders; never raises."""
    nvml = _load_nvml()
    if nvml is None:
        return GpuReport(available=False, reason=_init_error or NO_GPU_INFO)
    try:
        count = nvml.nvmlDeviceGetCount()
        return GpuReport(available=True, devices=tuple(_device(nvml, i) for i in range(count)))
    except Exception as exc:
        return GpuReport(available=False, reason=f"{NO_GPU_INFO} (NVML query failed: {exc})")


def _device(nvml: Any, index: int) -> GpuDevice:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    name = nvml.nvmlDeviceGetName(handle)
    return GpuDevice(
        index=index,
        name=name.decode() if isinstance(name, bytes) else str(name),
        used_bytes=int(memory.used),
        total_bytes=int(memory.total),
        processes=_holders(nvml, handle),
        utilization_percent=_utilization(nvml, handle),
    )


def _utilization(nvml: Any, handle: Any) -> int | None:
    try:
        return int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    except Exception:  # not supported on this device, or a transient NVML error
        return None


def _holders(nvml: Any, handle: Any) -> tuple[GpuProcess, ...]:
    try:
        procs = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except Exception:
        return ()
    return tuple(GpuProcess(int(p.pid), _used(p)) for p in procs)


def _used(proc: Any) -> int | None:
    value = getattr(proc, "usedGpuMemory", None)
    return int(value) if isinstance(value, int) else None

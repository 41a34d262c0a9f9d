"""A full disk, injected: ``open`` in the given modules returns files whose writes draw on a
byte budget and fail with ENOSPC past it (for every fill level of a run, in process).

    budget = DiskBudget(1 << 40)
    inject_full_disk(monkeypatch, budget, fsio)     # measure a run's bytes ...
    total = budget.used                             # ... then replay it with less room
"""

from __future__ import annotations

import builtins
import errno
from types import ModuleType
from typing import Any

import pytest


class DiskBudget:
    """Bytes the "disk" still takes; every write past it fails with ENOSPC (also the
    retries a cleanup makes), and so does every flush after that."""

    def __init__(self, left: int) -> None:
        self.start = left
        self.left = left
        self.hits = 0

    @property
    def used(self) -> int:
        """Bytes written so far."""
        return self.start - self.left

    @property
    def full(self) -> bool:
        """Whether a write has hit the end of the budget."""
        return self.hits > 0

    def take(self, size: int) -> None:
        if size > self.left:
            self.hits += 1
            self.left = 0
            raise OSError(errno.ENOSPC, "No space left on device (injected)")
        self.left -= size


class FullFile:
    """A real file whose writes and flushes draw on a budget; closing flushes, as a
    buffered file does (and fails on a full disk), and the descriptor closes all the same."""

    def __init__(self, handle: Any, budget: DiskBudget) -> None:
        self._handle = handle
        self._budget = budget

    def write(self, data: Any) -> int:
        size = len(data.encode()) if isinstance(data, str) else memoryview(data).nbytes
        self._budget.take(size)
        return int(self._handle.write(data))

    def flush(self) -> None:
        if self._budget.full:
            raise OSError(errno.ENOSPC, "No space left on device (injected, flush)")
        self._handle.flush()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._handle.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    def __enter__(self) -> FullFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def inject_full_disk(monkeypatch: pytest.MonkeyPatch, budget: DiskBudget,
                     *modules: ModuleType) -> None:
    """Files opened for writing by ``modules`` (their global ``open``) draw on ``budget``."""
    real_open = builtins.open

    def full_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(file, mode, *args, **kwargs)
        return FullFile(handle, budget) if any(m in mode for m in "wax") else handle

    for module in modules:
        monkeypatch.setattr(module, "open", full_open, raising=False)

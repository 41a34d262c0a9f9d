"""Fixtures of the batch tests: a private state dir, and no worker outlives its test."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from batch_helpers import wait_lock_free

from eagle_tui.core.batches.registry import BatchRecord, Registry
from eagle_tui.core.shards.batchdir.lock import is_held


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Registry]:
    """The registry of a private state dir; every worker still alive at the end is killed."""
    monkeypatch.setenv("EAGLE_TUI_STATE_DIR", str(tmp_path / "state"))
    registry = Registry()
    yield registry
    for record in registry.all():
        _kill_worker(record)


def _kill_worker(record: BatchRecord) -> None:
    out_dir = Path(record.out_dir)
    if not is_held(out_dir) or record.pid is None:
        return
    with contextlib.suppress(psutil.Error):
        process = psutil.Process(record.pid)
        # Only our worker: a reused pid would have another start time.
        if record.pid_started is None or abs(process.create_time() - record.pid_started) < 1:
            os.kill(record.pid, signal.SIGKILL)
    wait_lock_free(out_dir, timeout=10)

"""The demo's keeper as real processes: a run kept with ``demo --keep`` survives the next
demo's sweep of stale runs (files and batch record), while an abandoned run is swept."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.records import stored_config

from eagle_tui.core.batches.registry import BatchRecord, Registry
from eagle_tui.tui.demokeeper import OWNER_FILE

pytestmark = pytest.mark.slow


def plant_run(base: Path, name: str, registry: Registry, owner: int) -> Path:
    """A run directory with a batch in it, registered, owned by ``owner``."""
    run = base / name
    batch = run / "batch"
    batch.mkdir(parents=True)
    (run / OWNER_FILE).write_text(f"{owner}\n")
    registry.save(BatchRecord(id=f"id-{name}", name=name, out_dir=str(batch),
                              socket=str(batch / "control.sock"), log=str(batch / "w.log"),
                              config=stored_config(batch), created_at=time.time()))
    return run


def keeper(run: Path, owner: int, registry: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "eagle_tui.tui.demokeeper", "--run", str(run),
         "--owner", str(owner), "--registry", str(registry)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def quit_keeper(process: subprocess.Popen[str], words: str) -> None:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(f"{words}\n")
    process.stdin.flush()
    assert process.stdout.readline().strip() == "clean"
    process.stdin.close()
    process.stdout.close()


def gone_pid() -> int:
    """The PID of a process that has exited (an owner that is gone)."""
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def test_a_kept_run_survives_the_next_demos_sweep(tmp_path: Path) -> None:
    base, registry = tmp_path / "demo", Registry(tmp_path / "batches")
    kept = plant_run(base, "run-kept", registry, os.getpid())
    first = keeper(kept, os.getpid(), registry.root)
    quit_keeper(first, "quit keep")  # `demo --keep` quitting
    first.kill()  # done; it would wait for its owner (this test) to go
    first.wait(timeout=30)
    (kept / OWNER_FILE).write_text(f"{gone_pid()}\n")  # that demo has exited since
    abandoned = plant_run(base, "run-abandoned", registry, gone_pid())

    new = plant_run(base, "run-new", registry, os.getpid())
    second = keeper(new, os.getpid(), registry.root)  # the next demo: sweeps stale runs first
    quit_keeper(second, "quit")
    second.kill()  # it would wait for its owner (this test) to go
    second.wait(timeout=30)

    ids = {record.id for record in registry.all()}
    assert (kept / "batch").is_dir() and "id-run-kept" in ids  # kept: files and record stay
    assert (kept / "kept").exists()  # the mark later sweeps read
    assert not abandoned.exists() and "id-run-abandoned" not in ids  # stale: swept
    assert not new.exists() and "id-run-new" not in ids

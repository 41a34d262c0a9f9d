"""SIGKILL a running ``capture`` at random moments and resume it, for single- and multi-turn
batches alike, checking the batch directory after every crash: only intact shards, no sample
stored twice, nothing stored lost."""

from __future__ import annotations

import random
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from eagle_tui.core.shards.batchdir.scan import scan_completed
from eagle_tui.core.shards.manifest import Manifest
from support.waiting import exited, wait_until

Start = Callable[[bool, Path], "subprocess.Popen[bytes]"]
"""Starts the capture (``--resume`` when the flag is true), its stderr to the given log."""


def rows_stored(out: Path, rows: int) -> Callable[[], bool]:
    """A condition: the manifest in ``out`` counts at least ``rows`` done rows."""
    def stored() -> bool:
        manifest = Manifest.load_optional(out)
        return manifest is not None and manifest.counts.done >= rows

    return stored


def assert_only_valid_shards(out_dir: Path) -> Counter[str]:
    """Every listed shard is intact and ``shards/`` holds nothing else (temp files of an
    interrupted run aside); returns how often each sample id is stored."""
    scan = scan_completed(out_dir)
    assert not [f for f in scan.ignored if f.listed], scan.ignored
    import pyarrow.parquet as pq

    counts: Counter[str] = Counter()
    for info in scan.trusted:
        table = pq.read_table(out_dir / "shards" / info.name, columns=["sample_id"])
        counts.update(str(v) for v in table.column("sample_id").to_pylist())
    return counts


def kill_at_random_moments(start: Start, out: Path, logs: Path, rng: random.Random, *,
                           rows_below: int, crashes: int = 5) -> None:
    """Start (then resume) the capture ``crashes`` times, killing it each time once a random
    number of rows is stored. The moments are progress points, not wall-clock times, so a
    fast machine cannot finish the batch before it is killed; the extra sleep lands the kill
    anywhere inside a shard."""
    stored_before = 0
    for attempt, target in enumerate(sorted(rng.sample(range(1, rows_below), crashes))):
        process = start(attempt > 0, logs / f"run{attempt}.log")
        wait_until(rows_stored(out, target), 120, f"{target} rows stored",
                   unless=exited(process, "the capture (before it could be killed)"))
        time.sleep(rng.uniform(0.0, 0.08))  # the random moment of the crash
        process.kill()
        process.wait(timeout=30)
        counts = assert_only_valid_shards(out)
        assert set(counts.values()) <= {1}, "a sample stored twice after a crash"
        assert len(counts) >= stored_before
        stored_before = len(counts)

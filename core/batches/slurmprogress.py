"""A Slurm array of ``capture --shard auto`` tasks as one job: total progress, rate and ETA
(the dashboard's Capture view with ``--slurm-job``; ``slurmjob.follow`` reads the tasks).

The job's size is not in any manifest: every slice names the same prompt file (on the shared
filesystem) and its presets, so the job holds ``records × presets`` rows. The file is counted
once per (path, size, mtime); a multi-turn job (rows per turn) or an unreadable file has no
known size, and then no ETA. The rate is rows stored over the last ``RATE_WINDOW_S`` of looks,
so a requeued task that resumes adds no jump.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path

import msgspec

from eagle_tui.core.batches.slurmjob import SlurmJobView
from eagle_tui.core.clock import Clock
from eagle_tui.core.shards.manifest import Manifest

RATE_WINDOW_S = 60.0
CHUNK = 1 << 20


@dataclass(frozen=True)
class SlurmJobProgress:
    """The job at one look: its tasks and totals, and how fast it goes."""

    view: SlurmJobView
    total: int | None          # rows the whole job will hold (None: not known)
    rows_per_s: float | None   # None until two looks span some time
    eta_s: float | None

    @property
    def fraction(self) -> float | None:
        """Rows stored of the job's total (None when the total is not known)."""
        if not self.total:
            return None
        return min(1.0, self.view.rows / self.total)


def count_records(path: Path) -> int:
    """Non-blank lines of a JSON-lines prompt file (read in chunks: it may be large)."""
    records, last = 0, b"\n"
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            records += sum(1 for line in chunk.split(b"\n")[:-1] if line.strip())
            last = chunk
    # The lines split at chunk edges are counted where they end; the last one may not end.
    return records + (1 if last.rsplit(b"\n", 1)[-1].strip() else 0)


class JobSize:
    """``records × presets`` of the job's prompt file, counted once per version of it."""

    def __init__(self) -> None:
        self._counted: dict[tuple[str, int, int], int] = {}

    def rows(self, directory: Path) -> int | None:
        """Rows the job of the slice in ``directory`` will hold, or None."""
        manifest = Manifest.load_optional(directory)
        if manifest is None or manifest.config.turns is not msgspec.UNSET:
            return None
        prompts = Path(manifest.config.prompt_file)
        try:
            stat = prompts.stat()
            key = (str(prompts), stat.st_size, stat.st_mtime_ns)
            if key not in self._counted:
                self._counted = {key: count_records(prompts)}
        except OSError:
            return None
        return self._counted[key] * max(1, len(manifest.extra.presets))


class JobRate:
    """Rows per second over the recent looks (an injected clock: tests step it)."""

    def __init__(self, clock: Clock, window_s: float = RATE_WINDOW_S) -> None:
        self.clock = clock
        self.window_s = window_s
        self._looks: deque[tuple[float, int]] = deque()

    def add(self, rows: int) -> float | None:
        """Record ``rows`` now; the rate over the window (None with one look)."""
        now = self.clock.monotonic()
        self._looks.append((now, rows))
        while len(self._looks) > 2 and now - self._looks[1][0] >= self.window_s:
            self._looks.popleft()
        first_at, first_rows = self._looks[0]
        if now - first_at <= 0:
            return None
        return max(0.0, (rows - first_rows) / (now - first_at))


def job_progress(view: SlurmJobView, size: JobSize, rate: JobRate) -> SlurmJobProgress:
    """The job's totals, rate and ETA from one look at its tasks."""
    started = [task.directory for task in view.tasks if task.directory is not None]
    total = size.rows(started[0]) if started else None
    per_s = rate.add(view.rows)
    eta = None
    if total is not None and per_s and view.count("running"):
        failed = sum(task.failed for task in view.tasks)
        eta = max(0, total - view.rows - failed) / per_s
    return SlurmJobProgress(view, total, per_s, eta)


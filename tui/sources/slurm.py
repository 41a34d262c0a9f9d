"""A Slurm array job followed for the Capture view (``eagle-tui --slurm-job ID --runs DIR``).

``squeue`` is a process and the slice manifests sit on a shared filesystem, so ``follow``
looks every ``LOOK_EVERY_S`` (``core.batches.slurmjob.follow``, then ``slurmprogress``) in the
Capture view's thread worker and keeps the newest result; the view reads ``latest()`` without
waiting. A failed look is kept as its
one-line reason, beside the last good result.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from eagle_tui.core.batches.slurmjob import Squeue, follow
from eagle_tui.core.batches.slurmprogress import JobRate, JobSize, SlurmJobProgress, job_progress
from eagle_tui.core.clock import Clock, SystemClock
from eagle_tui.core.errors import ConfigError

log = logging.getLogger(__name__)

LOOK_EVERY_S = 5.0  # squeue asks the controller: not once a second from every dashboard


@dataclass(frozen=True)
class SlurmLook:
    """The newest good look at the job (None before the first) and the last error."""

    progress: SlurmJobProgress | None
    error: str | None = None


class SlurmFollower:
    """Follows one array job; ``follow`` runs the looks (blocking: in a thread worker)."""

    def __init__(self, job_id: str, runs: Sequence[Path], *, clock: Clock | None = None,
                 squeue: Squeue | None = None, every_s: float = LOOK_EVERY_S) -> None:
        self.job_id = job_id
        self.runs = tuple(runs)
        self.every_s = every_s
        self._squeue = squeue
        self._size = JobSize()
        self._rate = JobRate(clock or SystemClock())
        self._latest = SlurmLook(None)
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def latest(self) -> SlurmLook:
        """What the last look found (never blocks)."""
        with self._lock:
            return self._latest

    def look(self) -> SlurmLook:
        """Ask ``squeue`` and read the manifests now (the thread's step; tests call it)."""
        try:
            view = follow(self.job_id, self.runs, self._squeue)
            found = SlurmLook(job_progress(view, self._size, self._rate))
        except ConfigError as e:
            found = SlurmLook(self.latest().progress, str(e))
        except Exception as e:  # a look must never take the dashboard down
            log.exception("following slurm job %s failed", self.job_id)
            found = SlurmLook(self.latest().progress, f"{type(e).__name__}: {e}")
        with self._lock:
            self._latest = found
        return found

    def follow(self, cancelled: threading.Event) -> None:
        """Look now and every ``every_s`` until ``cancelled`` is set or ``close`` is called."""
        while not (cancelled.is_set() or self._stop.is_set()):
            self.look()
            cancelled.wait(self.every_s)

    def close(self) -> None:
        """End ``follow`` after its current look."""
        self._stop.set()

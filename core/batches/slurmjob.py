"""Following a Slurm array of ``capture --shard auto`` tasks from a head node (``batches
--slurm-job ID --runs DIR``): each task's state, node and reason from ``squeue``, its slice's
rows and requeues from the manifest it writes on the shared filesystem.

``squeue -h -r -t all -j ID -o FORMAT`` lists every task of the array, one line each, ended
ones too while the controller holds them (``MinJobAge``, 300 s by default); after that the job
is unknown to it (exit 1, "Invalid job id specified") and the manifests alone tell how each
slice ended. ``sacct`` is not used: it needs an accounting database, and Slurm 22.05 cannot read
array fields back from its job-completion file (tests/fixtures/slurm/PROVENANCE.md). A slice
directory belongs to the job when the newest start its manifest records
(``extra.scheduler_runs``) names this job id; its task id is the array index.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from eagle_tui.core.errors import ConfigError
from eagle_tui.core.fsio import describe_os_error
from eagle_tui.core.shards.manifest import Manifest

SQUEUE_FORMAT = "%i|%A|%F|%K|%T|%r|%N|%M|%S"
"""task, own job id, array job id, array index, state, reason, node, time used, start."""

ENDED_BADLY = frozenset({"FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
                         "DEADLINE", "CANCELLED", "PREEMPTED"})
RUNNING = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "RESIZING", "SIGNALING",
                     "STAGE_OUT"})

SQUEUE_TIMEOUT_S = 60.0
"""Longest wait for ``squeue``: a controller that does not answer by then is down or stuck."""
ARRAY_INDEX = re.compile(r"[0-9]{1,9}")
"""An array index as Slurm prints it: ASCII digits (``str.isdigit`` takes ``²``), and fewer
than ten of them (``MaxArraySize`` is at most 4,000,001)."""

Squeue = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


@dataclass(frozen=True)
class QueuedTask:
    """One array task as ``squeue`` lists it."""

    index: int
    state: str
    reason: str
    node: str
    elapsed: str


@dataclass(frozen=True)
class SliceTask:
    """One task of the job: what the queue says and what its slice directory holds."""

    index: int
    state: str              # squeue's state; else the manifest's (finished, stopped, failed)
    node: str
    reason: str
    slice: str              # "I/N" from the manifest, "" without a directory yet
    rows: int
    failed: int
    restarts: int
    directory: Path | None

    @property
    def category(self) -> str:
        """done, running, pending or failed (for the job's totals)."""
        if self.state in RUNNING:
            return "running"
        if self.state in ENDED_BADLY or self.state in ("failed", "stopped"):
            return "failed"
        if self.state in ("COMPLETED", "finished"):
            return "done"
        return "pending"


@dataclass(frozen=True)
class SlurmJobView:
    """Every task of one array job, and the totals."""

    job_id: str
    tasks: tuple[SliceTask, ...]
    queue_known: bool       # False: the controller no longer holds the job (manifests only)

    @property
    def slices(self) -> int | None:
        """N of the slices' ``I/N`` (None before any task has made its directory)."""
        counts = {int(task.slice.split("/")[1]) for task in self.tasks if task.slice}
        return max(counts) if counts else None

    def count(self, category: str) -> int:
        """Tasks in ``category`` (done, running, pending, failed)."""
        return sum(1 for task in self.tasks if task.category == category)

    @property
    def rows(self) -> int:
        return sum(task.rows for task in self.tasks)

    @property
    def requeues(self) -> int:
        return sum(task.restarts for task in self.tasks)


def parse_squeue(text: str, job_id: str) -> list[QueuedTask]:
    """``squeue -h -r -o SQUEUE_FORMAT`` output -> the array's tasks (ConfigError when the
    job is not an array)."""
    tasks = []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) != SQUEUE_FORMAT.count("|") + 1:
            continue
        _, _, _, index, state, reason, node, elapsed, _ = fields
        if index == "N/A":
            raise ConfigError(f"Slurm job {job_id} is not an array (squeue: array index "
                              f"{index!r}): capture --shard auto runs as array tasks")
        if not ARRAY_INDEX.fullmatch(index):
            raise ConfigError(f"squeue printed array index {index[:40]!r} for Slurm job "
                              f"{job_id}, not a number; run `squeue -j {job_id}` to see what "
                              "it prints (is squeue on PATH Slurm's?)")
        tasks.append(QueuedTask(int(index), state, reason, node, elapsed))
    return tasks


def read_queue(job_id: str, squeue: Squeue | None = None) -> list[QueuedTask] | None:
    """The array's tasks from ``squeue``; None when the controller no longer holds the job."""
    run = squeue or _run_squeue
    try:
        done = run(["squeue", "-h", "-r", "-t", "all", "-j", job_id, "-o", SQUEUE_FORMAT])
    except FileNotFoundError as e:
        raise ConfigError("squeue is not installed here: follow a Slurm job from a node of "
                          "its cluster (a head node), with SLURM_CONF set if it is not "
                          "the default") from e
    except subprocess.TimeoutExpired as e:
        raise ConfigError(f"squeue -j {job_id} did not answer within {SQUEUE_TIMEOUT_S:g} s: "
                          "the Slurm controller is down or overloaded; try again later "
                          "(`scontrol ping` says whether it answers)") from e
    except OSError as e:
        raise ConfigError(f"cannot run squeue: {describe_os_error(e)}") from e
    if done.returncode != 0:
        if "Invalid job id" in done.stderr:
            return None
        raise ConfigError(f"squeue -j {job_id} failed (exit {done.returncode}): "
                          f"{done.stderr.strip()[:300]}")
    return parse_squeue(done.stdout, job_id)


def _run_squeue(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """``squeue`` run to its end within :data:`SQUEUE_TIMEOUT_S`, in a session of its own so
    that a timeout ends whatever it started too (a child holding its pipes open would keep
    ``communicate`` waiting); its output must be UTF-8 (Slurm prints ASCII)."""
    with subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, start_new_session=True) as process:
        try:
            out, err = process.communicate(timeout=SQUEUE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # its own group: only what it started
            process.communicate()
            raise
    return subprocess.CompletedProcess(argv, process.returncode, _utf8(out, argv),
                                       _utf8(err, argv))


def _utf8(data: bytes, argv: Sequence[str]) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{argv[0]} printed bytes that are not UTF-8 (byte {e.start} of its "
                          f"output); run `{' '.join(argv[:-2])}` to see what it prints (is "
                          "squeue on PATH Slurm's?)") from e


def job_slices(job_id: str, runs: Sequence[Path]) -> dict[int, tuple[Path, Manifest]]:
    """The slice directories under ``runs`` (each a directory, or a parent of them) whose
    newest start was a task of Slurm job ``job_id``, by array index."""
    found: dict[int, tuple[Path, Manifest]] = {}
    for root in runs:
        try:
            children = sorted(p for p in root.iterdir() if p.is_dir())
        except OSError as e:
            raise ConfigError(f"cannot list {root}: {describe_os_error(e)}; give --runs a "
                              "directory this user can read") from e
        for directory in (root, *children):
            manifest = Manifest.load_optional(directory)
            if manifest is None or not manifest.extra.scheduler_runs:
                continue
            newest = manifest.extra.scheduler_runs[-1]
            if newest.scheduler == "slurm" and newest.job_id == job_id:
                found[_task_index(newest.task_id, directory)] = (directory, manifest)
    return found


def _task_index(task_id: str, directory: Path) -> int:
    """The array index a slice's manifest records (ConfigError when it is not one)."""
    if not ARRAY_INDEX.fullmatch(task_id):
        raise ConfigError(f"the manifest in {directory} records Slurm task id {task_id[:40]!r}, "
                          "not an array index; that directory was not written by capture "
                          "--shard auto: fix it or leave it out of --runs")
    return int(task_id)


def follow(job_id: str, runs: Sequence[Path], squeue: Squeue | None = None) -> SlurmJobView:
    """The job now: every task the queue or a slice directory knows."""
    queued = read_queue(job_id, squeue)
    slices = job_slices(job_id, runs)
    by_index = {task.index: task for task in queued or ()}
    tasks = tuple(_task(index, by_index.get(index), slices.get(index))
                  for index in sorted(by_index.keys() | slices.keys()))
    return SlurmJobView(job_id, tasks, queued is not None)


def _task(index: int, queued: QueuedTask | None,
          stored: tuple[Path, Manifest] | None) -> SliceTask:
    directory, manifest = stored if stored else (None, None)
    runs = manifest.extra.scheduler_runs if manifest else []
    ended = manifest.extra.state if manifest and manifest.extra.state else "unknown"
    return SliceTask(
        index=index,
        state=queued.state if queued else str(ended),
        # A queued task is where squeue says (nowhere while pending); else where it last ran.
        node=queued.node if queued else runs[-1].node if runs else "",
        reason=queued.reason if queued and queued.reason != "None" else "",
        slice=manifest.extra.partition or "" if manifest else "",
        rows=manifest.counts.done if manifest else 0,
        failed=manifest.counts.failed if manifest else 0,
        restarts=max((run.restart_count or 0 for run in runs), default=0),
        directory=directory)

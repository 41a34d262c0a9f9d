"""A Slurm array job as the Capture view shows it: one job (pure: no widgets, no I/O).

The meter is the job's rows against its total with the rate and ETA; the summary line counts
the slices by state and the requeues; one short line per task follows (the ``batches
--slurm-job`` table's columns, narrower).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eagle_tui.core.text import duration
from eagle_tui.tui.render.meter import MeterValue

if TYPE_CHECKING:
    from eagle_tui.core.batches.slurmjob import SliceTask
    from eagle_tui.core.batches.slurmprogress import SlurmJobProgress

TASK_LINES = 16
"""Tasks listed under the job (a 1,000-task array is summed up, not listed whole)."""


def job_meter(job: SlurmJobProgress) -> MeterValue:
    """``12,345/600,000 rows (2%) · 41.2 rows/s · ETA 4h02m``."""
    rows = job.view.rows
    total = f"{job.total:,}" if job.total is not None else "?"
    label = f"{rows:,}/{total} rows"
    if job.fraction is not None:
        label += f" ({job.fraction:.0%})"
    if job.rows_per_s is not None:
        label += f" · {job.rows_per_s:.1f} rows/s"
    label += f" · ETA {duration(job.eta_s)}" if job.eta_s is not None else " · no ETA"
    return MeterValue(job.fraction, label)


def job_title(job: SlurmJobProgress) -> str:
    """``slurm job 812 · 16 slices: 3 done, 12 running, 1 pending, 0 failed · 2 requeues``."""
    view = job.view
    slices = view.slices or len(view.tasks)
    requeues = f"{view.requeues} requeue{'s' if view.requeues != 1 else ''}"
    gone = "" if view.queue_known else " · no longer in squeue (states from the manifests)"
    return (f"slurm job {view.job_id} · {slices} slices: {view.count('done')} done, "
            f"{view.count('running')} running, {view.count('pending')} pending, "
            f"{view.count('failed')} failed · {requeues}{gone}")


def task_line(task: SliceTask) -> str:
    """``  3  RUNNING    gpu07   3/16    1,204 rows  0 failed  1 requeue``."""
    state = f"{task.state} ({task.reason})" if task.reason else task.state
    where = task.node or "-"
    requeues = f"  {task.restarts} requeue{'s' if task.restarts != 1 else ''}" \
        if task.restarts else ""
    return (f"{task.index:>4}  {state[:22]:<22} {where[:10]:<10} {task.slice or '-':<7} "
            f"{task.rows:>9,} rows  {task.failed} failed{requeues}")


def task_lines(job: SlurmJobProgress, limit: int = TASK_LINES) -> list[str]:
    """Failed and running tasks first (what needs a look), then the rest, at most ``limit``."""
    order = {"failed": 0, "running": 1, "pending": 2, "done": 3}
    tasks = sorted(job.view.tasks, key=lambda t: (order[t.category], t.index))
    lines = [task_line(task) for task in tasks[:limit]]
    if len(tasks) > limit:
        lines.append(f"      … {len(tasks) - limit} more tasks")
    return lines

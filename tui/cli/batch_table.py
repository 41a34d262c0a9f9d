"""Plain-text formatting of batch views for the CLI verbs."""

from __future__ import annotations

import time

import msgspec

from eagle_tui.core.batches.api import StatusDoc
from eagle_tui.core.batches.slurmjob import SliceTask, SlurmJobView
from eagle_tui.core.batches.survey import BatchView
from eagle_tui.core.capture.progress import Progress, progress_fields
from eagle_tui.core.text import terminal_safe
from eagle_tui.core.wire import Wire, enc_hook

HEADER = ("ID", "NAME", "STATE", "ROWS", "FAILED", "SAMPLES/S", "TOK/S", "ETA", "PID")
_UNKNOWN = Progress()


class SavedProgress(Wire, frozen=True):
    """A batch's counts as ``--json`` prints them while no worker answers: its saved
    ``Progress`` without what only a running worker knows (in flight, retrying, rates,
    ETA), fields in name order as they have always been printed."""

    already_done: int
    done: int
    elapsed_s: float
    failed: int
    flagged: int
    interrupted: int
    output_tokens: int
    rejected: int
    remaining: int | None
    settled: int
    total: int | None
    written: int

    @classmethod
    def of(cls, progress: Progress) -> SavedProgress:
        """The fields of ``progress`` that outlive its worker."""
        return cls(**{name: getattr(progress, name) for name in cls.__struct_fields__})


class NoProgress(Wire, frozen=True):
    """``{}``: no progress known (a worker that has not saved any yet)."""


BatchCounts = Progress | SavedProgress | NoProgress
"""A batch's ``counts`` in ``batches --json`` and ``status --json``: a running worker's
whole ``Progress``, what a stopped one saved, or nothing yet."""


def rows_done(progress: Progress | None) -> int:
    """Rows captured over all runs of the batch."""
    p = progress or _UNKNOWN
    return p.already_done + p.done


def batch_counts(view: BatchView) -> BatchCounts:
    """The batch's counts for ``--json``: all of them while its worker answers, the saved
    ones otherwise (``SavedProgress``), ``NoProgress`` when none are known."""
    if view.progress is None:
        return NoProgress()
    if view.live_status is not None:
        return view.progress
    return SavedProgress.of(view.progress)


def record_json(view: BatchView) -> dict[str, object]:
    """The registry record as JSON values, without its config (no saved progress is {})."""
    data: dict[str, object] = msgspec.to_builtins(view.record, enc_hook=enc_hook)
    data["last_progress"] = msgspec.to_builtins(view.record.last_progress or {}, order="sorted")
    data.pop("config", None)
    return data


def table_row(view: BatchView) -> tuple[str, ...]:
    """One line of the ``batches`` table (rates and ETA only while a worker answers)."""
    p, r = view.progress or _UNKNOWN, view.record
    f = progress_fields(p, unknown="-")
    rows = f"{rows_done(p)}/{p.total}" if p.total is not None else str(rows_done(p))
    live = view.live_status is not None
    return (r.id, r.name, view.state, rows, f.failed,
            f.samples_per_s if live else "-",
            f.tokens_per_s if live else "-",
            f.eta if view.live else "-",
            str(r.pid) if view.live and r.pid else "-")


def table(views: list[BatchView]) -> str:
    """The ``batches`` table, columns aligned."""
    # Names, states and ids come from records and workers: never let them drive the terminal.
    rows = [HEADER, *(tuple(terminal_safe(c) for c in table_row(v)) for v in views)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
                     .rstrip() for row in rows)


def details(view: BatchView) -> str:
    """Everything about one batch, for ``batches BATCH``."""
    r, p = view.record, view.progress or _UNKNOWN
    lines = [f"batch     {r.id} ({r.name})", f"state     {view.state}"]
    if view.detail:
        lines.append(f"          {view.detail}")
    lines += [f"output    {r.out_dir}", f"log       {r.log}", f"control   {r.socket}",
              f"created   {_when(r.created_at)}   runs {r.runs}"]
    if r.ended_at:
        lines.append(f"ended     {_when(r.ended_at)}")
    f = progress_fields(p)
    lines.append(f"rows      {rows_done(p)}" + (f" of {p.total}" if p.total is not None else "")
                 + f"   failed {f.failed}   rejected {f.rejected}   flagged {f.flagged}")
    if view.live_status is not None:
        lines += _live_lines(view.live_status)
    return "\n".join(terminal_safe(line) for line in lines)


def _live_lines(status: StatusDoc) -> list[str]:
    f = progress_fields(status.progress, unknown="?")
    lines = [f"rate      {f.samples_per_s} samples/s   {f.tokens_per_s} tokens/s   "
             f"in flight {f.in_flight}   eta {f.eta}"]
    for server in status.servers:
        lines.append(f"server    {server.url}  {server.state}  "
                     f"{server.in_flight}/{server.limit} in flight  {server.reason}")
    for kind, recent in status.recent_errors.items():
        detail = (recent[-1].detail or "") if recent else ""
        lines.append(f"error     {kind} x{status.errors.get(kind, len(recent))}: {detail}")
    lines.append(f"shards    {len(status.shards)}")
    return lines


def _when(stamp: float | None) -> str:
    if not stamp:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


SLURM_HEADER = ("TASK", "STATE", "NODE", "SLICE", "ROWS", "FAILED", "REQUEUES", "DIRECTORY")


def slurm_table(view: SlurmJobView) -> str:
    """``batches --slurm-job``: a line for the job, then one row per task."""
    slices = view.slices
    queue = "" if view.queue_known else " (no longer in squeue: states from the manifests)"
    head = (f"slurm job {view.job_id}: {len(view.tasks)} tasks"
            f"{f' for {slices} slices' if slices else ''}; {view.count('done')} done, "
            f"{view.count('running')} running, {view.count('pending')} pending, "
            f"{view.count('failed')} failed; {view.rows:,} rows; {view.requeues} "
            f"requeue{'s' if view.requeues != 1 else ''}{queue}")
    rows = [SLURM_HEADER, *(_slurm_row(task) for task in view.tasks)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(SLURM_HEADER))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
             .rstrip() for row in rows]
    return terminal_safe(head) + "\n" + "\n".join(terminal_safe(line) for line in lines)


def _slurm_row(task: SliceTask) -> tuple[str, ...]:
    state = f"{task.state} ({task.reason})" if task.reason else task.state
    return (str(task.index), state, task.node or "-", task.slice or "-", f"{task.rows:,}",
            str(task.failed), str(task.restarts),
            str(task.directory) if task.directory else "(not started)")


def slurm_json(view: SlurmJobView) -> dict[str, object]:
    """``batches --slurm-job --json``: the job's totals and its tasks."""
    return {"job_id": view.job_id, "queue_known": view.queue_known, "slices": view.slices,
            "done": view.count("done"), "running": view.count("running"),
            "pending": view.count("pending"), "failed": view.count("failed"),
            "rows": view.rows, "requeues": view.requeues,
            "tasks": [{"task": t.index, "state": t.state, "reason": t.reason, "node": t.node,
                       "slice": t.slice, "rows": t.rows, "failed": t.failed,
                       "requeues": t.restarts,
                       "directory": None if t.directory is None else str(t.directory)}
                      for t in view.tasks]}

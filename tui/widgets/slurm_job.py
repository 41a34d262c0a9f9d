"""A Slurm array job as one job in the Capture view (``eagle-tui --slurm-job ID``)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from eagle_tui.tui.render import literal
from eagle_tui.tui.render import slurm as text
from eagle_tui.tui.sources.slurm import SlurmLook
from eagle_tui.tui.widgets.meter import Meter


class SlurmJobPanel(Vertical):
    """The job's title, its progress meter, the problem of the last look, one line a task."""

    def __init__(self, job_id: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.job_id = job_id

    def compose(self) -> ComposeResult:
        yield Static(literal.content(f"slurm job {self.job_id} · asking squeue…"),
                     classes="slurm-title")
        yield Meter(classes="slurm-progress")
        yield Static("", classes="slurm-error", markup=False)
        yield Static("", classes="slurm-tasks", markup=False)

    def show(self, look: SlurmLook) -> None:
        """Update every line from the newest look."""
        error = self.query_one(".slurm-error", Static)
        error.update(literal.content(look.error or ""))
        error.display = bool(look.error)
        job = look.progress
        if job is None:
            return
        self.query_one(".slurm-title", Static).update(literal.content(text.job_title(job)))
        self.query_one(".slurm-progress", Meter).value = text.job_meter(job)
        tasks = "\n".join(text.task_lines(job))
        self.query_one(".slurm-tasks", Static).update(literal.content(tasks))

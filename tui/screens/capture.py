"""The Capture view: every batch with its progress and rates; start, pause, resume, stop.

Reads ``CaptureControl.batches()`` (non-blocking snapshots) a few times a second; actions
go through the same interface. Batches run in detached workers, so this view lists every
batch in the registry (also those started earlier or with ``capture --detach``), and a
batch keeps running when the dashboard quits.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Static
from textual.worker import get_current_worker

from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.errors import ConfigError
from eagle_tui.tui.render import literal
from eagle_tui.tui.render.batch import BatchSnapshot
from eagle_tui.tui.render.capture import (
    COLUMNS,
    BatchHistory,
    columns_that_fit,
    content_widths,
    sort_key,
    table_cells,
)
from eagle_tui.tui.screens.base import ViewScreen
from eagle_tui.tui.screens.batch_forms import NewBatchScreen, StopBatchScreen
from eagle_tui.tui.sources.capture import BatchRequest, CaptureControl
from eagle_tui.tui.widgets.batch_detail import BatchDetail
from eagle_tui.tui.widgets.nav_table import NavTable, set_columns
from eagle_tui.tui.widgets.slurm_job import SlurmJobPanel

if TYPE_CHECKING:
    from eagle_tui.tui.sources.slurm import SlurmFollower

HELP = """\
Every capture batch in the registry (detached workers: they keep running when the
dashboard quits), with its state, progress, samples/s and tokens/s, ETA, failures and
flags. The selected batch (arrow keys) is shown below: its progress bar, rate sparklines,
counts, failures and flags by kind, and each server's in-flight requests.

`n` starts a new batch from a form that is checked before anything starts. `space` pauses
or resumes the selected batch (in-flight requests finish either way). `s` stops it: drain
(in-flight requests finish for the batch's stop grace period, then the rest are aborted) or
abort (at once); the dialog says how many requests and how long. `w` streams its next 8
requests to the Streams view. `i` opens it in the Inspect view. `r` continues a stopped,
failed or interrupted batch in a new worker. Actions that do not apply now are greyed out;
`--readonly` hides them.

ETA is shown only while the batch is running, finishing samples and has a server ready;
otherwise the bar says why there is none. Rates are drawn from zero (a flat line is no
progress). `o` sorts by the next column (or click a header), `O` reverses; `j`/`k`, `g`/`G`
move, `/` searches the table, `n`/`N` next/previous match.

Started with `--slurm-job ID` (and `--runs DIR`), the view first shows that Slurm array of
`capture --shard auto` tasks as **one job**: rows stored of the job's total (the prompt
file's records × presets), rows/s over the last minute, ETA, the slices done, running,
pending and failed, the requeues, and one line per task (failed and running first: state,
node, slice, rows). It asks `squeue` every 5 seconds and reads each slice's manifest.
"""
WATCH_COUNT = 8
SCROLLBAR = 2
"""Cells kept free beside the table for its vertical scrollbar (many batches)."""


class CaptureScreen(ViewScreen):
    """Batch table, selected batch detail, batch actions."""

    VIEW = "capture"
    HELP_TEXT = HELP
    AUTO_FOCUS = "#batch-table"
    MUTATING_ACTIONS = frozenset({"new_batch", "pause_resume", "stop_batch", "watch", "resume_run"})
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "new_batch", "New", id="capture.new"),
        # Short words: the footer holds every shown key whole at 80 columns (help, ?, has
        # the long story; o sorts, also by a click on a header).
        Binding("space", "pause_resume", "Pause", id="capture.pause"),
        Binding("s", "stop_batch", "Stop", id="capture.stop"),
        Binding("w", "watch", "Watch", id="capture.watch"),
        Binding("r", "resume_run", "Resume", id="capture.resume"),
        Binding("i", "inspect", "Inspect", id="capture.inspect"),
        Binding("o", "sort_next", "Sort", show=False, id="capture.sort"),
        Binding("O", "sort_reverse", "Reverse sort", show=False, id="capture.sort_reverse"),
    ]

    _ACTIONS = tuple(binding.action for binding in BINDINGS if isinstance(binding, Binding))

    def __init__(self) -> None:
        super().__init__()
        self.histories: dict[str, BatchHistory] = {}
        self.snapshots: tuple[BatchSnapshot, ...] = ()
        self.sort_column: int | None = None
        """Index in ``COLUMNS`` of the column the table is sorted by (None: registry order)."""
        self.sort_reverse = False
        self.shown_columns: tuple[int, ...] = ()
        """Indices in ``COLUMNS`` of the columns that fit the terminal's width."""
        self.widths: tuple[int, ...] = ()
        """The shown columns' widths in cells: their widest cells or labels."""
        self._wanted: str | None = None
        """A batch just started, to select once the registry lists it."""

    @property
    def control(self) -> CaptureControl | None:
        """The capture interface (None when this dashboard cannot capture)."""
        return self.eagle.sources.capture

    def compose_body(self) -> ComposeResult:
        slurm = self.eagle.sources.slurm
        if slurm is not None:
            yield SlurmJobPanel(slurm.job_id, id="slurm-job")
        yield NavTable(id="batch-table", cursor_type="row")
        yield Static("no batches yet: press n to start one", id="batch-empty", markup=False)
        yield BatchDetail(id="batch-detail")

    def on_mount(self) -> None:
        if self.eagle.sources.slurm is not None:
            self._follow_slurm(self.eagle.sources.slurm)
        self.refresh_batches()
        self.set_interval(self.eagle.options.refresh_s, self.refresh_batches)

    @work(thread=True, group="slurm-follow", exit_on_error=False)
    def _follow_slurm(self, slurm: SlurmFollower) -> None:
        slurm.follow(get_current_worker().cancelled_event)

    # -- refresh -----------------------------------------------------------------------------

    def refresh_batches(self) -> None:
        """Take fresh snapshots and update the table and the detail pane."""
        control = self.control
        self.snapshots = control.batches() if control is not None else ()
        for snapshot in self.snapshots:
            self.histories.setdefault(snapshot.batch_id, BatchHistory()).record(snapshot)
        self._update_table()
        if self._wanted is not None:
            self.select_batch(self._wanted)
        self._update_detail()
        self._update_slurm()
        self.refresh_footer_on_change(self._ACTIONS)  # every tick: ~7 % of a core otherwise

    def _update_slurm(self) -> None:
        slurm = self.eagle.sources.slurm
        if slurm is not None:
            self.query_one(SlurmJobPanel).show(slurm.latest())

    def on_resize(self) -> None:
        self._update_table()
        if self._wanted is not None:
            self.select_batch(self._wanted)

    def _update_table(self) -> None:
        table = self.query_one("#batch-table", DataTable)
        rows = {
            snapshot.batch_id: [literal.rich_text(cell) for cell in table_cells(snapshot)]
            for snapshot in self.snapshots
        }  # measured as shown: an escape in a name is drawn wider than the raw string measures
        every_width = content_widths([[cell.plain for cell in row] for row in rows.values()])
        shown = columns_that_fit(every_width, self.size.width - SCROLLBAR)
        widths = tuple(every_width[index] for index in shown)
        if shown == self.shown_columns:  # grow only: a rebuild each tick would move the view
            widths = tuple(map(max, widths, self.widths))
        if (shown, widths) != (self.shown_columns, self.widths):
            self._set_columns(table, shown, widths)
        for key, row in rows.items():
            cells = [row[index] for index in shown]
            if key in table.rows:
                for column, cell in zip(table.columns, cells, strict=True):
                    table.update_cell(key, column, cell)  # literal: made above
            else:
                table.add_row(*cells, key=key)  # literal: made above
        known = {snapshot.batch_id for snapshot in self.snapshots}
        for row_key in [row_key for row_key in table.rows if row_key.value not in known]:
            table.remove_row(row_key)  # forgotten from the registry
        self._sort(table)
        self.query_one("#batch-empty").display = not self.snapshots

    def _set_columns(
        self, table: DataTable[Text], shown: tuple[int, ...], widths: tuple[int, ...]
    ) -> None:
        """Show the columns ``shown`` at ``widths`` (the terminal's width or a cell's width
        changed): rows are added again by the caller, the selected batch stays selected."""
        selected = self.selected()
        set_columns(table, [COLUMNS[index] for index in shown], widths)
        self.shown_columns, self.widths = shown, widths
        if selected is not None and self._wanted is None:
            self._wanted = selected.batch_id

    def _sort(self, table: DataTable[Text]) -> None:
        if self.sort_column not in self.shown_columns or not table.row_count:
            return
        column = list(table.columns)[self.shown_columns.index(self.sort_column)]
        table.sort(column, key=lambda cell: sort_key(cell.plain), reverse=self.sort_reverse)

    def _update_detail(self) -> None:
        detail = self.query_one(BatchDetail)
        selected = self.selected()
        self.eagle.selected_batch = selected.out_dir if selected is not None else None
        detail.display = selected is not None
        if selected is not None:
            detail.show(selected, self.histories[selected.batch_id])

    def selected(self) -> BatchSnapshot | None:
        """The batch under the table cursor (rows may be sorted: found by key)."""
        table = self.query_one("#batch-table", DataTable)
        if not self.snapshots or table.row_count == 0:
            return None
        row = min(max(table.cursor_row, 0), table.row_count - 1)
        key = table.coordinate_to_cell_key(Coordinate(row, 0)).row_key.value
        return next((s for s in self.snapshots if s.batch_id == key), None)

    def action_sort_next(self) -> None:
        """Sort by the next column (the first press sorts by the first)."""
        shown = self.shown_columns
        at = shown.index(self.sort_column) + 1 if self.sort_column in shown else 0
        self.sort_column = shown[at % len(shown)]
        self._resort()

    def action_sort_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self._resort()

    @on(DataTable.HeaderSelected, "#batch-table")
    def _header_selected(self, event: DataTable.HeaderSelected) -> None:
        column = self.shown_columns[event.column_index]
        if self.sort_column == column:
            self.sort_reverse = not self.sort_reverse
        self.sort_column = column
        self._resort()

    def _resort(self) -> None:
        self._sort(self.query_one("#batch-table", DataTable))
        column = COLUMNS[self.sort_column] if self.sort_column is not None else "registry order"
        order = "descending" if self.sort_reverse else "ascending"
        self.notify(literal.shown(f"sorted by {column}, {order}"), markup=False, timeout=2)
        self._update_detail()

    @on(DataTable.RowHighlighted, "#batch-table")
    def _row_highlighted(self) -> None:
        self._update_detail()
        self.refresh_bindings()

    # -- actions -----------------------------------------------------------------------------

    def action_state(self, action: str) -> bool | None:
        if self.control is None:
            return action not in self.MUTATING_ACTIONS
        selected = self.selected()
        live = selected is not None and selected.live and selected.state != BatchState.STOPPING
        if action in ("pause_resume", "stop_batch", "watch"):
            return True if live else None
        if action == "resume_run":
            return True if selected is not None and selected.resumable else None
        if action == "inspect":
            return True if selected is not None else None
        return True

    def action_new_batch(self) -> None:
        form = NewBatchScreen(self._form_defaults(), find_tokenizer=self._server_tokenizer)
        self.app.push_screen(form, self._start)

    def _form_defaults(self) -> dict[str, str]:
        servers = " ".join(feed.target.url.public for feed in self.eagle.sources.servers)
        tokenizer = self.eagle.options.tokenizer
        return {
            "servers": servers,
            "concurrency": "8",
            "max_new_tokens": "4096",
            "tokenizer": str(tokenizer) if tokenizer else "",
            "shard_rows": str(BatchRequest.shard_rows),
        }

    def _server_tokenizer(self) -> tuple[Path, str] | None:
        """The local tokenizer directory a watched server's ``/model_info`` names, and that
        server (BLOCKING: the form asks from a worker)."""
        from eagle_tui.tui.sources.model_info import server_tokenizer

        found = server_tokenizer(tuple(feed.target.url for feed in self.eagle.sources.servers))
        return (found[0], found[1].public) if found is not None else None

    def _start(self, request: BatchRequest | None) -> None:
        if request is None or self.control is None:
            return
        self.notify(literal.shown(f"starting a worker for {request.out_dir}"), title="New batch",
                    markup=False)
        self._launch(self.control, request)

    @work(thread=True, group="capture-start", exit_on_error=False)
    def _launch(self, control: CaptureControl, request: BatchRequest) -> None:
        """Start the batch off the UI thread (a detached worker takes seconds to start)."""
        try:
            batch_id = control.start(request)
        except ConfigError as exc:
            self.app.call_from_thread(self._started, None, str(exc), request)
        except Exception as exc:  # a bug or an OS error: say so, keep the app up
            self.app.call_from_thread(self._started, None, f"{type(exc).__name__}: {exc}", request)
        else:
            self.app.call_from_thread(self._started, batch_id, None, request)

    def _started(self, batch_id: str | None, error: str | None, request: BatchRequest) -> None:
        if batch_id is None:
            self.notify(literal.shown(error or "?"), title="Batch not started", severity="error",
                        markup=False)
            return
        self.notify(literal.shown(f"{batch_id} → {request.out_dir}"), title="Batch started",
                    markup=False)
        self.refresh_batches()
        self.select_batch(batch_id)

    def select_batch(self, batch_id: str) -> None:
        """Put the cursor on ``batch_id``'s row (the detail follows); no row yet: the next
        refresh that lists it does."""
        table = self.query_one("#batch-table", DataTable)
        if batch_id in table.rows:
            self._wanted = None
            table.move_cursor(row=table.get_row_index(batch_id))
        else:
            self._wanted = batch_id

    def action_resume_run(self) -> None:
        selected = self.selected()
        if selected is None or self.control is None or not selected.resumable:
            return
        self.control.resume(selected.batch_id)
        self.notify("starting a new worker", title=literal.shown(selected.batch_id), markup=False)

    def action_pause_resume(self) -> None:
        selected = self.selected()
        if selected is None or self.control is None:
            return
        if selected.state == BatchState.PAUSED:
            self.control.resume(selected.batch_id)
        else:
            self.control.pause(selected.batch_id)

    def action_stop_batch(self) -> None:
        selected = self.selected()
        if selected is None:
            return
        batch_id = selected.batch_id

        def chosen(choice: str | None) -> None:
            if choice and self.control is not None:
                self.control.stop(batch_id, abort=choice == "abort")
                self.notify(literal.shown(f"{choice} requested"), title=literal.shown(batch_id),
                            markup=False)

        progress = selected.progress
        in_flight = progress.counts.in_flight if progress is not None else None
        screen = StopBatchScreen(batch_id, in_flight=in_flight, grace_s=selected.stop_grace_s)
        self.app.push_screen(screen, chosen)

    def action_inspect(self) -> None:
        """Open the selected batch in the Inspect view."""
        selected = self.selected()
        if selected is not None:
            self.eagle.inspect(selected.out_dir)

    def action_watch(self) -> None:
        selected = self.selected()
        if selected is None or self.control is None:
            return
        self.control.watch(selected.batch_id, WATCH_COUNT)
        self.eagle.watching = selected.batch_id
        self.eagle.switch_view("streams")

    def palette_commands(self) -> Iterable[SystemCommand]:
        commands = (
            ("new_batch", "Capture: new batch", "Start a capture batch from a form"),
            ("pause_resume", "Capture: pause or resume", "Pause or resume the selected batch"),
            ("stop_batch", "Capture: stop", "Drain or abort the selected batch"),
            ("watch", "Capture: watch 8 requests", "Stream the next 8 requests live"),
            ("resume_run", "Capture: resume run", "Continue a stopped or interrupted batch"),
            ("inspect", "Inspect: the selected batch", "Open the selected batch in Inspect (i)"),
        )
        for action, title, help_text in commands:
            if self.check_action(action, ()):
                action_method = getattr(self, f"action_{action}")
                yield SystemCommand(title, help_text, action_method)  # literal: constants

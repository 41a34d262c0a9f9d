"""The Inspect view: page through captured samples, filter them, open one decoded.

All shard reads run in thread workers through ``SampleSource`` (footers, two small columns
for counts and filters, one page of rows at a time); results come back as messages.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import DataTable, Input, Select, Static

from eagle_tui.core.sample_ids import turn_of
from eagle_tui.core.samples.select import ANY, CLEAN, FLAGGED, SampleFilter
from eagle_tui.core.validate import ENDED_FLAG, FLAGS, ending_reason, ending_text
from eagle_tui.tui.render import literal
from eagle_tui.tui.render.flags import badge_text
from eagle_tui.tui.screens.base import ViewScreen
from eagle_tui.tui.screens.sample import SampleScreen, SampleView, copy_with_feedback
from eagle_tui.tui.sources.recent import RecentSource
from eagle_tui.tui.sources.samples import (
    PAGE_SIZE,
    SamplePage,
    SampleRow,
    SampleSource,
    ShardSummary,
)
from eagle_tui.tui.widgets.field import Field
from eagle_tui.tui.widgets.nav_table import (
    NavTable,
    SearchableTable,
    column_widths,
    set_columns,
)

HELP = """\
Pick a batch directory, a `shards/` directory or one parquet file (`o` edits the path,
Enter opens it; `i` in the Capture view opens the batch selected there, and with no path
typed this view opens that batch), or several batch directories separated by spaces: the
`--shard` slices of one job, read as one as `eagle-tui inspect` reads them. The table pages
through the samples
without loading the shards whole: `n`/`p` next and previous page, `r` reloads (a running
batch keeps adding shards).
Filter by **flag** (`clean`, `flagged` or one flag) and by **finish reason** with the two
selectors. The line under the summary says how many rows `eagle-tui export` would keep with
its default filter, and why it would drop the others. `/` finds a row anywhere in the
batch, not only on the page shown: by its number (`150` or `#150`), its sample id, or part
of one; the page that holds it opens with the cursor on it. In a multi-turn batch `v` lists the
highlighted row's conversation, every stored turn in order; `v` again lists all rows.

Enter opens the highlighted sample: decoded with the same highlighting as live streams
(`t` switches to raw ids, `p` hides the prompt), with its validation flags. It is decoded
as `eagle-tui inspect` decodes it: with `--tokenizer`, else the batch's recorded tokenizer
where it is now, else the bundled one when the shards name it. `c` copies the sample id.
"""
COLUMNS = ("#", "sample_id", "prompt", "output", "finish", "flags")
FINISH_CHOICES = ("stop", "length", "abort")
Samples = SampleSource | RecentSource


class PathField(Field):
    """The path box: Enter opens the path and gives the keys back to the rows."""

    LEAVES_ON_ENTER = True


class SourceOpened(Message):
    """Shards were opened (``source`` None and ``error`` set when they could not be)."""

    def __init__(self, source: Samples | None, summary: ShardSummary | None, error: str):
        super().__init__()
        self.source = source
        self.summary = summary
        self.error = error


class PageReady(Message):
    """A page of rows is ready to show."""

    def __init__(self, page: SamplePage) -> None:
        super().__init__()
        self.page = page


class RowFound(Message):
    """The row a search named, across the whole job (``index`` None: no row has it)."""

    def __init__(self, text: str, index: int | None, position: int | None) -> None:
        super().__init__()
        self.text = text
        self.index = index
        self.position = position


class SampleReady(Message):
    """A sample was read (and decoded when a tokenizer was available)."""

    def __init__(self, view: SampleView, *, final: bool) -> None:
        super().__init__()
        self.view = view
        self.final = final


def paths_in(text: str) -> list[Path]:
    """The paths an input names: one path as typed, or several (the ``--shard`` slices of one
    job, read as one) separated by spaces and quoted as in a shell."""
    typed = Path(text.strip()).expanduser()
    if typed.exists():
        return [typed]
    try:
        parts = shlex.split(text)
    except ValueError:  # an unclosed quote: take the text as one path
        parts = []
    return [Path(part).expanduser() for part in parts] or [typed]


def flag_options(summary: ShardSummary | None) -> list[tuple[str, str]]:
    """Select options: any, clean, flagged, then each flag (with its count when known)."""
    counts = summary.flag_counts if summary else {}
    names = list(dict.fromkeys((*FLAGS, *sorted(counts))))
    options = [("flag: any", ANY), ("clean", CLEAN), ("flagged", FLAGGED)]
    options += [(literal.shown(f"{name} ({counts.get(name, 0)})"), name) for name in names]
    return options


def finish_options(summary: ShardSummary | None) -> list[tuple[str, str]]:
    """Select options: any, then each finish reason (with counts when known)."""
    counts = summary.finish_counts if summary else {}
    names = list(dict.fromkeys((*FINISH_CHOICES, *sorted(counts))))
    return [("finish: any", ANY),
            *((literal.shown(f"{n} ({counts.get(n, 0)})"), n) for n in names)]


def summary_text(summary: ShardSummary, page: SamplePage | None) -> str:
    """``1,234 rows in 3 shards · 56 flagged · page 1/13 (100 shown of 1,234)``."""
    flagged = summary.rows - summary.clean
    shards = f"{summary.shards} shard" + ("" if summary.shards == 1 else "s")
    if summary.shards or not summary.rows:
        head = f"{summary.rows:,} rows in {shards}"
    else:
        head = f"{summary.rows:,} recent rows from the running worker (no shard yet; r reloads)"
    parts = [head, *([f"one job: {summary.job}"] if summary.job else []), f"{flagged:,} flagged"]
    if summary.ignored:
        parts.append(f"{len(summary.ignored)} files ignored")
    if page is not None and page.filter.conversation is not None:
        turns = f"{page.matching} turn" + ("" if page.matching == 1 else "s")
        parts.append(f"conversation {page.filter.conversation}: {turns} (v: all rows)")
        parts += [ending_of(row) for row in page.rows if ENDED_FLAG in row.flags]
    elif page is not None:
        parts.append(f"page {page.page + 1}/{page.pages} of {page.matching:,} matching")
    return " · ".join(parts)


def ending_of(row: SampleRow) -> str:
    """``conversation c004 ended after turn 0: no </think> (truncated)`` for the row
    flagged ``conversation_ended``."""
    turn = turn_of(row.sample_id)
    return ending_text(row.conversation_id or row.sample_id, -1 if turn is None else turn,
                       ending_reason(row.flags, row.finish_reason))


def row_cells(row: SampleRow) -> tuple[Text, ...]:
    """Table cells as literal ``Text`` (a DataTable would parse plain strings as markup)."""
    return (
        literal.rich_text(str(row.index)),
        literal.rich_text(row.sample_id),
        literal.rich_text(f"{row.prompt_len:,}", justify="right"),
        literal.rich_text(f"{row.output_len:,}", justify="right"),
        literal.rich_text(row.finish_reason),
        literal.rich_text(badge_text(row.flags) if row.flags else "clean"),
    )


class InspectScreen(ViewScreen):
    """Paged, filtered table of samples over ``SampleSource``."""

    VIEW = "inspect"
    HELP_TEXT = HELP
    AUTO_FOCUS = "#inspect-table"
    BINDINGS: ClassVar[list[BindingType]] = [
        # Priority: the path field has the keys before the next key of a burst arrives.
        Binding("o", "edit_path", "Open path", priority=True, id="inspect.path"),
        Binding("r", "reload", "Reload", id="inspect.reload"),
        Binding("n", "page(1)", "Next page", id="inspect.next"),
        Binding("p", "page(-1)", "Prev page", id="inspect.prev"),
        Binding("c", "copy_id", "Copy id", id="inspect.copy"),
        Binding("v", "conversation", "Conversation", id="inspect.conversation"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.source: Samples | None = None
        self.summary: ShardSummary | None = None
        self.page: SamplePage | None = None
        self._open_sample: SampleScreen | None = None
        self._cursor_to: int | None = None
        """The row (global index) to put the cursor on when its page arrives."""

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="inspect-bar"):
            yield PathField(
                self._initial_path(),
                placeholder="batch or shard directory",
                id="inspect-path",
                compact=True,
            )
            yield Select(
                flag_options(None), value=ANY, allow_blank=False, id="inspect-flag", compact=True
            )
            yield Select(
                finish_options(None),
                value=ANY,
                allow_blank=False,
                id="inspect-finish",
                compact=True,
            )
        yield Static("no shards open", id="inspect-summary", markup=False)
        yield Static("", id="inspect-export", markup=False)
        table = NavTable(id="inspect-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(*COLUMNS)
        yield table

    def _initial_path(self) -> str:
        asked = self._asked()
        if asked:
            return asked
        dirs = self.eagle.sources.shard_dirs
        return dirs[0] if len(dirs) == 1 else shlex.join(dirs)

    def _asked(self) -> str:
        """The batch the Capture view asked to open (``i``), once; else ""."""
        asked, self.eagle.inspect_request = self.eagle.inspect_request, None
        return str(asked) if asked is not None else ""

    def on_mount(self) -> None:
        path = self.query_one("#inspect-path", Input).value
        if path.strip():
            self._open(paths_in(path))

    def on_screen_resume(self) -> None:
        """Shown again: open the batch asked for, or, with no path typed yet, the batch
        selected in the Capture view."""
        field = self.query_one("#inspect-path", Input)
        wanted = self._asked()
        if not wanted and not field.value.strip() and self.eagle.selected_batch is not None:
            wanted = str(self.eagle.selected_batch)
        if wanted and wanted != field.value:
            field.value = wanted
            self._open(paths_in(wanted))

    # -- opening -----------------------------------------------------------------------------

    def action_edit_path(self) -> None:
        self.set_focus(self.query_one("#inspect-path", Input))  # at once: a burst goes there

    def action_reload(self) -> None:
        """Open the path again (a running batch adds shards as it goes)."""
        path = self.query_one("#inspect-path", Input).value
        if path.strip():
            self._open(paths_in(path))

    @on(Input.Submitted, "#inspect-path")
    def _path_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value.strip():
            self._open(paths_in(event.value))
            if self.focused is event.input:  # Enter moved it on already (submit_field)
                self.focus_main()  # the rows have the keys: Enter opens one, j/k move

    @work(thread=True, exclusive=True, group="inspect-open", exit_on_error=False)
    def _open(self, paths: list[Path]) -> None:
        shown = " ".join(map(str, paths))
        self._set_summary(f"opening {shown} …")
        source: Samples
        try:
            source = SampleSource(paths)
            summary = source.summary()
        except Exception as exc:  # ShardError, OSError, pyarrow errors: show them
            recent = self._recent_of_running_batch(paths)
            if recent is None:
                self.post_message(SourceOpened(None, None, f"cannot open {shown}: {exc}"))
                return
            source, summary = recent, recent.summary()
        if not summary.rows and (recent := self._recent_of_running_batch(paths)) is not None:
            source.close()  # no shard yet: the worker's recent rows instead
            source, summary = recent, recent.summary()
        self.post_message(SourceOpened(source, summary, ""))
        self.post_message(PageReady(source.page(0)))

    def _recent_of_running_batch(self, paths: list[Path]) -> RecentSource | None:
        """A running batch writing to the one path given that has no shard yet: its
        worker's recent rows (so it can be spot-checked before its first shard). Blocking."""
        control = self.eagle.sources.capture
        if control is None or len(paths) != 1:
            return None
        path = paths[0]
        wanted = path.expanduser().resolve()
        for snapshot in control.batches():
            if snapshot.live and snapshot.out_dir.expanduser().resolve() == wanted:
                rows = control.recent(snapshot.batch_id)
                if rows:
                    return RecentSource(path, rows, snapshot.batch_id, snapshot.tokenizer)
        return None

    def _set_summary(self, text: str) -> None:
        summary = self.query_one("#inspect-summary", Static)
        self.app.call_from_thread(summary.update, literal.content(text))

    @on(SourceOpened)
    def _source_opened(self, message: SourceOpened) -> None:
        if message.source is None or message.summary is None:
            self.query_one("#inspect-summary", Static).update(literal.content(message.error))
            self.notify(literal.shown(message.error), title="Inspect", severity="error",
                        markup=False)
            return
        if self.source is not None:
            self.source.close()
        self.source, self.summary, self.page = message.source, message.summary, None
        export = message.summary.export
        self.query_one("#inspect-export", Static).update(
            literal.content(export.text() if export is not None else "")
        )
        self._reset_filters(message.summary)

    def _reset_filters(self, summary: ShardSummary) -> None:
        with self.prevent(Select.Changed):
            flag = self.query_one("#inspect-flag", Select)
            flag.set_options(flag_options(summary))
            flag.value = ANY
            finish = self.query_one("#inspect-finish", Select)
            finish.set_options(finish_options(summary))
            finish.value = ANY

    # -- paging and filtering ------------------------------------------------------------------

    @on(Select.Changed)
    def _filter_changed(self, event: Select.Changed) -> None:
        event.stop()
        if self.source is not None:
            self._load_page(self.current_filter(), 0)

    def current_filter(self) -> SampleFilter:
        """The filter the two selectors describe (within the conversation shown, if any)."""
        flag = self.query_one("#inspect-flag", Select).value
        finish = self.query_one("#inspect-finish", Select).value
        return SampleFilter(
            str(flag) if flag != Select.NULL else ANY,
            str(finish) if finish != Select.NULL else ANY,
            self.page.filter.conversation if self.page is not None else None,
        )

    def action_conversation(self) -> None:
        """List every turn of the highlighted row's conversation; again: all rows."""
        if self.page is None:
            return
        if self.page.filter.conversation is not None:
            self._load_page(replace(self.page.filter, conversation=None), 0)
            return
        row = self.highlighted_row()
        if row is not None and row.conversation_id is not None:
            self._load_page(replace(self.page.filter, conversation=row.conversation_id), 0)

    def action_page(self, step: int) -> None:
        if self.source is not None and self.page is not None:
            self._load_page(self.page.filter, self.page.page + step)

    @work(thread=True, exclusive=True, group="inspect-page", exit_on_error=False)
    def _load_page(self, wanted: SampleFilter, number: int) -> None:
        source = self.source
        if source is None:
            return
        try:
            if self.page is None or wanted != self.page.filter:
                source.select(wanted)
            page = source.page(number)
        except Exception as exc:
            self._set_summary(f"cannot read {source.path}: {exc}")
            return
        self.post_message(PageReady(page))

    @on(PageReady)
    def _page_ready(self, message: PageReady) -> None:
        self.page = message.page
        table = self.query_one("#inspect-table", DataTable)
        cells = [row_cells(row) for row in message.page.rows]
        set_columns(table, COLUMNS, column_widths(COLUMNS, cells))
        for row, row_of_cells in zip(message.page.rows, cells, strict=True):
            table.add_row(*row_of_cells, key=str(row.index))  # literal: row_cells
        if self._cursor_to is not None and str(self._cursor_to) in table.rows:
            table.move_cursor(row=table.get_row_index(str(self._cursor_to)))
            self._cursor_to = None
        if self.summary is not None:
            text = summary_text(self.summary, message.page)
            self.query_one("#inspect-summary", Static).update(literal.content(text))
        self.refresh_bindings()

    def action_state(self, action: str) -> bool | None:
        if action == "edit_path":  # an "o" typed in a field is a letter
            return not isinstance(self.focused, Input)
        if action == "page":
            return None if self.page is None or self.page.pages < 2 else True
        if action == "copy_id":
            return None if self.highlighted_row() is None else True
        if action == "conversation":
            return self._conversation_state()
        return True

    def _conversation_state(self) -> bool | None:
        """Hidden unless the rows are turns of conversations (a multi-turn batch)."""
        if self.page is None:
            return False
        if self.page.filter.conversation is not None:
            return True
        if not any(row.conversation_id is not None for row in self.page.rows):
            return False
        row = self.highlighted_row()
        return True if row is not None and row.conversation_id is not None else None

    # -- searching the whole job ---------------------------------------------------------------

    def search_table(self, table: SearchableTable, text: str) -> None:
        """``/``: the row ``text`` names anywhere in the job (a row number, a sample id or
        part of one), not only on the page shown."""
        if self.source is None or not text.strip():
            table.set_search(text)
            return
        self._find(text)

    @work(thread=True, exclusive=True, group="inspect-find", exit_on_error=False)
    def _find(self, text: str) -> None:
        source = self.source
        if source is None:
            return
        try:
            index = source.find(text)
        except Exception as exc:
            self._set_summary(f"cannot search {source.path}: {exc}")
            return
        position = source.position(index) if index is not None else None
        self.post_message(RowFound(text, index, position))

    @on(RowFound)
    def _row_found(self, message: RowFound) -> None:
        source, page = self.source, self.page
        if source is None or page is None:
            return
        if message.index is None:
            self.notify(literal.shown(
                f"no row of the {source.rows:,} in this job has the number or an id "
                f"holding {message.text.strip()!r} (searched every shard)"),
                title="Search", markup=False, timeout=5)
            return
        self._cursor_to = message.index
        if message.position is None:  # filtered out: show every row
            self._reset_filters_to_any()
            self._load_page(SampleFilter(), message.index // PAGE_SIZE)
        else:
            self._load_page(page.filter, message.position // PAGE_SIZE)

    def _reset_filters_to_any(self) -> None:
        with self.prevent(Select.Changed):
            self.query_one("#inspect-flag", Select).value = ANY
            self.query_one("#inspect-finish", Select).value = ANY

    # -- samples -------------------------------------------------------------------------------

    def highlighted_row(self) -> SampleRow | None:
        """The row under the table cursor."""
        if self.page is None or not self.page.rows:
            return None
        cursor = self.query_one("#inspect-table", DataTable).cursor_row
        return self.page.rows[cursor] if 0 <= cursor < len(self.page.rows) else None

    def action_copy_id(self) -> None:
        row = self.highlighted_row()
        if row is not None:
            copy_with_feedback(self, row.sample_id, "the sample id")

    @on(DataTable.RowSelected, "#inspect-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        row = self.highlighted_row()
        if row is not None:
            self._read_sample(row.index)

    @work(thread=True, exclusive=True, group="inspect-sample", exit_on_error=False)
    def _read_sample(self, index: int) -> None:
        from eagle_tui.tui.sources.documents import sample_document

        source, cache = self.source, self.eagle.sources.tokenizers
        if source is None:
            return
        try:
            row = source.sample(index)
            raw = sample_document(row, source.decoding(index, None))
        except Exception as exc:
            self._set_summary(f"cannot read sample {index}: {exc}")
            return
        self.post_message(SampleReady(SampleView(row, raw, "decoding…"), final=False))
        tokenizer, why = (
            cache.try_choice(source.tokenizer_choice(cache.preferred)) if cache else (None, "")
        )
        if tokenizer is None:
            self.post_message(SampleReady(SampleView(row, raw, f"raw ids: {why}"), final=True))
            return
        document = sample_document(row, source.decoding(index, tokenizer))
        warning = source.warning(tokenizer)
        if warning:  # as `eagle-tui inspect` warns on stderr
            self.app.call_from_thread(self.notify, warning, title="Inspect",
                                      severity="warning", markup=False)
        note = f"decoded with {tokenizer.name}"
        self.post_message(SampleReady(SampleView(row, document, note), final=True))

    @on(SampleReady)
    def _sample_ready(self, message: SampleReady) -> None:
        if not message.final:
            self._open_sample = SampleScreen(message.view)
            self.app.push_screen(self._open_sample)
            return
        screen = self._open_sample
        if screen is not None and screen.is_attached and screen.view.row is message.view.row:
            screen.show_document(message.view.document, message.view.decoder_note)

    def palette_commands(self) -> Iterable[SystemCommand]:
        yield SystemCommand(
            "Inspect: open path", "Type a batch or shard directory to open", self.action_edit_path
        )
        if self.highlighted_row() is not None:
            yield SystemCommand(
                "Inspect: copy sample id", "Copy the highlighted sample's id", self.action_copy_id
            )

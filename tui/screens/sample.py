"""One captured sample, decoded, with the same highlighting as live streams, its flags and
(when a speculating server answered it) its acceptance."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Footer, Static

from eagle_tui.core.fsio import write_atomic
from eagle_tui.core.shards.schema import ShardRow
from eagle_tui.core.validate import ENDED_FLAG, ending_reason, ending_text
from eagle_tui.tui.clipboard import ClipboardReach, copy_feedback
from eagle_tui.tui.render import literal
from eagle_tui.tui.render.accept import stored_acceptance_text
from eagle_tui.tui.render.sample_export import decoded_text, export_path, sample_json
from eagle_tui.tui.render.tokens import TokenDocument
from eagle_tui.tui.screens.base import scroll_edge, scroll_keys, scroll_lines
from eagle_tui.tui.widgets.flags import FlagBadges
from eagle_tui.tui.widgets.token_view import TokenLegend, TokenView


@dataclass(frozen=True)
class SampleView:
    """What the sample screen shows: the row, its document and how it was decoded."""

    row: ShardRow
    document: TokenDocument
    decoder_note: str


def sample_header(row: ShardRow) -> str:
    """Two lines (no collision at 80 columns): ``id · prompt 812 + output 1,034 tokens ·
    finish stop (163586)`` and ``think_end at 900 · 3.20 s · endpoint rid R``."""
    output = len(row.input_ids) - row.prompt_len
    stop = f" ({row.matched_stop})" if row.matched_stop is not None else ""
    think_end = row.think_end if row.think_end >= 0 else "none"  # as `eagle-tui inspect` says
    turn = (f" · conversation {row.conversation_id} turn {row.turn} (parent "
            f"{row.parent_id or 'none'})" if row.conversation_id is not None else "")
    if row.conversation_id is not None and ENDED_FLAG in row.flags:
        turn += "\n" + ending_text(row.conversation_id, row.turn or 0,
                                   ending_reason(row.flags, row.finish_reason))
    return (
        f"{row.sample_id} · prompt {row.prompt_len:,} + output {output:,} tokens · "
        f"finish {row.finish_reason}{stop}\n"
        f"think_end at {think_end} · {row.latency_s:.2f} s · {row.endpoint} rid {row.rid}"
        f"{turn}"
    )


class SampleScreen(Screen[None]):
    """Full-screen view of one sample; Esc returns to the table."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back", id="sample.back"),
        Binding("t", "toggle_mode", "Text/ids", id="sample.mode"),
        Binding("p", "toggle_prompt", "Prompt", id="sample.prompt"),
        Binding("c", "copy_id", "Copy id", id="sample.copy"),
        Binding("y", "copy_text", "Copy text", id="sample.copy_text"),
        Binding("e", "export", "Export JSON", id="sample.export"),
        *scroll_keys("sample"),
    ]
    HELP = (
        "`t` decoded text or raw ids, `p` show or hide the prompt, `c` copy the sample id, "
        "`y` copy the output text, `e` export the sample (ids and decoded text) as JSON to "
        "the current directory."
    )

    def __init__(self, view: SampleView) -> None:
        super().__init__(classes="sample-screen")
        self.view = view
        self.tokens = TokenView(view.document, id="sample-tokens")
        self.decoder = Static(literal.content(view.decoder_note), id="sample-decoder")

    def compose(self) -> ComposeResult:
        yield Static(literal.content(sample_header(self.view.row)), id="sample-header")
        acceptance = stored_acceptance_text(self.view.row.acceptance)
        if acceptance:  # only an answer of a speculating server stored any
            yield Static(literal.content(acceptance), id="sample-acceptance")
        badges = FlagBadges(id="sample-flags")
        badges.names = tuple(self.view.row.flags)
        yield badges
        yield self.decoder
        yield TokenLegend()
        with VerticalScroll(id="sample-body"):
            yield self.tokens
        yield Footer(compact=True, show_command_palette=False)

    def show_document(self, document: TokenDocument, note: str) -> None:
        """Swap in the decoded document once the tokenizer has loaded (safe before the
        screen has composed: the widgets exist from ``__init__``)."""
        self.tokens.show(document)
        self.decoder.update(literal.content(note))

    def action_toggle_mode(self) -> None:
        self.tokens.toggle_mode()

    def action_toggle_prompt(self) -> None:
        self.tokens.show_prompt = not self.tokens.show_prompt

    def action_copy_id(self) -> None:
        copy_with_feedback(self, self.view.row.sample_id, "the sample id")

    def action_copy_text(self) -> None:
        document = self.tokens.document
        text = decoded_text(document)
        if text is None:
            text = " ".join(str(i) for i in self.view.row.output_ids)
        what = "the output text" if document.decoded else "the output ids (not decoded)"
        copy_with_feedback(self, text, what, offer_export=True)

    def action_export(self) -> None:
        self._export(Path.cwd())

    @work(thread=True, group="sample-export", exit_on_error=False)
    def _export(self, directory: Path) -> None:
        path = export_path(directory, self.view.row.sample_id)
        data = sample_json(self.view.row, self.tokens.document, str(self.decoder.content))
        try:
            write_atomic(path, data)
        except OSError as exc:
            self.app.call_from_thread(self.notify, f"{path}: {exc}", title="Export failed",
                                      severity="error", markup=False)
            return
        self.app.call_from_thread(self.notify, str(path), title="Sample exported",
                                  markup=False)

    def action_scroll(self, step: int) -> None:
        scroll_lines(self.query_one("#sample-body", VerticalScroll), step)

    def action_edge(self, end: int) -> None:
        scroll_edge(self.query_one("#sample-body", VerticalScroll), end)


def copy_with_feedback(
    screen: Screen[None], text: str, what: str, *, offer_export: bool = False
) -> None:
    """Copy ``text`` with OSC 52 and say honestly whether it can have arrived."""
    from eagle_tui.tui.app import EagleApp

    app = screen.app
    app.copy_to_clipboard(text)
    reach = app.clipboard_reach if isinstance(app, EagleApp) else ClipboardReach("unknown")
    title, message = copy_feedback(what, reach)
    if reach.reach == "no" and offer_export:
        message += "; `e` exports the sample to a file instead"
    shown = text if len(text) <= 120 else text[:117] + "…"
    body = f"{shown}\n{message}" if message else shown
    severity: SeverityLevel = "warning" if reach.reach == "no" else "information"
    screen.notify(literal.shown(body), title=literal.shown(title), severity=severity, markup=False)

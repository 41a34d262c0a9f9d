"""One captured sample, decoded, with the same highlighting as live streams and its flags."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Static

from eagle_tui.core.shards.schema import ShardRow
from eagle_tui.tui.render.tokens import TokenDocument
from eagle_tui.tui.widgets.flags import FlagBadges
from eagle_tui.tui.widgets.token_view import TokenLegend, TokenView


@dataclass(frozen=True)
class SampleView:
    """What the sample screen shows: the row, its document and how it was decoded."""

    row: ShardRow
    document: TokenDocument
    decoder_note: str


def sample_header(row: ShardRow) -> str:
    """``id · prompt 812 + output 1,034 tokens · finish stop (163586) · endpoint · 3.2 s``."""
    output = len(row.input_ids) - row.prompt_len
    stop = f" ({row.matched_stop})" if row.matched_stop is not None else ""
    turn = (f" · conversation {row.conversation_id} turn {row.turn} (parent "
            f"{row.parent_id or 'none'})" if row.conversation_id is not None else "")
    return (
        f"{row.sample_id} · prompt {row.prompt_len:,} + output {output:,} tokens · "
        f"finish {row.finish_reason}{stop} · think_end at {row.think_end} · "
        f"{row.endpoint} rid {row.rid} · {row.latency_s:.2f} s{turn}"
    )


class SampleScreen(Screen[None]):
    """Full-screen view of one sample; Esc returns to the table."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back", id="sample.back"),
        Binding("t", "toggle_mode", "Text/ids", id="sample.mode"),
        Binding("p", "toggle_prompt", "Prompt", id="sample.prompt"),
        Binding("c", "copy_id", "Copy id", id="sample.copy"),
    ]
    HELP = "`t` decoded text or raw ids, `p` show or hide the prompt, `c` copy the sample id."

    def __init__(self, view: SampleView) -> None:
        super().__init__(classes="sample-screen")
        self.view = view
        self.tokens = TokenView(view.document, id="sample-tokens")
        self.decoder = Static(Content(view.decoder_note), id="sample-decoder")

    def compose(self) -> ComposeResult:
        yield Static(Content(sample_header(self.view.row)), id="sample-header")
        badges = FlagBadges(id="sample-flags")
        badges.names = tuple(self.view.row.flags)
        yield badges
        yield self.decoder
        yield TokenLegend()
        with VerticalScroll(id="sample-body"):
            yield self.tokens
        yield Footer(compact=True)

    def show_document(self, document: TokenDocument, note: str) -> None:
        """Swap in the decoded document once the tokenizer has loaded (safe before the
        screen has composed: the widgets exist from ``__init__``)."""
        self.tokens.show(document)
        self.decoder.update(Content(note))

    def action_toggle_mode(self) -> None:
        self.tokens.toggle_mode()

    def action_toggle_prompt(self) -> None:
        self.tokens.show_prompt = not self.tokens.show_prompt

    def action_copy_id(self) -> None:
        self.app.copy_to_clipboard(self.view.row.sample_id)
        self.notify(self.view.row.sample_id, title="Copied sample id", markup=False)

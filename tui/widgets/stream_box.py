"""One watched request: a bordered box titled with its id and state, its tokens inside."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical

from eagle_tui.tui.render import literal
from eagle_tui.tui.render.accept import request_acceptance_text
from eagle_tui.tui.render.flags import badge_text
from eagle_tui.tui.sources.streams import StreamView
from eagle_tui.tui.widgets.token_view import TokenView

STATES = ("streaming", "retrying", "finished", "failed", "waiting", "end lost")


def stream_title(view: StreamView) -> str:
    """``s00012 · r-abc · 1,234 ids · streaming`` (plus flags or the failure)."""
    parts = [view.sample_id, view.rid or "?", f"{view.total_ids:,} ids", view.state]
    if view.missed:
        parts.append(f"{view.missed:,} ids lost (incomplete)")
    if view.flags:
        parts.append(badge_text(view.flags))
    if view.detail:
        parts.append(view.detail[:80])
    if view.acceptance is not None:
        parts.append(request_acceptance_text(view.acceptance))
    return " · ".join(parts)


class StreamBox(Vertical):
    """Shows one ``StreamView``; ``show`` swaps in a newer one (of the same or, when the box
    is reused for another request, a new stream)."""

    def __init__(self, view: StreamView) -> None:
        super().__init__(classes="stream-box")
        self.sample_id = view.sample_id
        self.tokens = TokenView(view.document, tail=True, classes="stream-tokens")
        self.ended = False
        self.state = view.state
        self._set_state(view)

    def compose(self) -> ComposeResult:
        yield self.tokens

    def show(self, view: StreamView) -> None:
        """Update title, state and tokens (the title is literal ``Content``, never markup)."""
        self.sample_id = view.sample_id
        self._set_state(view)
        self.tokens.show(view.document)

    def _set_state(self, view: StreamView) -> None:
        self.ended, self.state = view.ended, view.state
        self.border_title = literal.content(stream_title(view))
        self.set_class(view.state == "finished", "-done")
        self.set_class(view.state == "failed", "-failed")
        self.set_class(view.state == "end lost", "-lost")

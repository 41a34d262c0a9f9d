"""The one-line bar at the top of every view: app name and the views with their keys."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.events import Click
from textual.message import Message
from textual.widgets import Static

from eagle_tui.tui.options import VIEW_TITLES, VIEWS
from eagle_tui.tui.render import literal


class ViewTab(Static):
    """One view's name and number key; clicking it switches to that view."""

    class Chosen(Message):
        """The user clicked the tab of ``view``."""

        def __init__(self, view: str) -> None:
            super().__init__()
            self.view = view

    def __init__(self, view: str, number: int, *, active: bool) -> None:
        label = literal.assemble((f" {number}", "bold"), f" {VIEW_TITLES[view]} ")
        super().__init__(label, classes="-active" if active else "", markup=False)
        self.view = view

    def on_click(self, event: Click) -> None:
        event.stop()
        self.post_message(self.Chosen(self.view))


class ViewTabs(Horizontal):
    """``eagle-tui  1 Server  2 Capture  3 Streams  4 Inspect  5 Fleet  <status>``; the
    default status is short enough to stay whole at 80 columns."""

    def __init__(self, active: str, status: str = "? help ^p cmds") -> None:
        super().__init__()
        self.active = active
        self._status = status

    def compose(self) -> ComposeResult:
        yield Static(" eagle-tui ", id="app-name", markup=False)
        for number, view in enumerate(VIEWS, start=1):
            yield ViewTab(view, number, active=view == self.active)
        yield Static(literal.content(self._status), id="tabs-status")

    def set_status(self, text: str) -> None:
        """Show ``text`` (literal) at the right end of the bar."""
        self.query_one("#tabs-status", Static).update(literal.content(text))

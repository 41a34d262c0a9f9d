"""What every view screen shares: the view bar on top, the footer below, help text, and
palette commands."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar, cast

from textual.app import ComposeResult, SystemCommand
from textual.screen import Screen
from textual.widgets import Footer

from eagle_tui.tui.widgets.view_tabs import ViewTab, ViewTabs

if TYPE_CHECKING:
    from eagle_tui.tui.app import EagleApp


class ViewScreen(Screen[None]):
    """Base of the four views. Subclasses set ``VIEW`` and ``HELP_TEXT`` and compose the body."""

    VIEW: ClassVar[str] = ""
    HELP_TEXT: ClassVar[str] = ""
    """Markdown shown by ? / F1 above the list of keys (our own text, never server text)."""

    MUTATING_ACTIONS: ClassVar[frozenset[str]] = frozenset()
    """Actions hidden in ``--readonly`` mode."""

    @property
    def eagle(self) -> EagleApp:
        """The app, typed."""
        return cast("EagleApp", self.app)

    def compose(self) -> ComposeResult:
        yield ViewTabs(self.VIEW)
        yield from self.compose_body()
        yield Footer(compact=True)

    def compose_body(self) -> ComposeResult:
        """The view's own widgets, between the view bar and the footer."""
        yield from ()

    def palette_commands(self) -> Iterable[SystemCommand]:
        """Commands this view adds to the command palette."""
        return ()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide mutating actions in read-only mode (False); otherwise ask ``action_state``."""
        if action in self.MUTATING_ACTIONS and self.eagle.options.readonly:
            return False
        return self.action_state(action)

    def action_state(self, action: str) -> bool | None:
        """True: available; None: shown greyed out (does not apply now); False: hidden."""
        return True

    def on_view_tab_chosen(self, message: ViewTab.Chosen) -> None:
        self.eagle.switch_view(message.view)

"""A yes/no question in a modal, for every action that stops or restarts something."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from eagle_tui.tui.render import literal


class ConfirmScreen(ModalScreen[bool]):
    """Asks ``question`` (literal text); dismisses with True on y / the confirm button."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]

    def __init__(self, question: str, *, confirm_label: str = "Yes", danger: bool = True) -> None:
        super().__init__()
        self._question = question
        self._confirm_label = confirm_label
        self._danger = danger

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Static(literal.content(self._question), id="confirm-question")
            with Horizontal(id="confirm-buttons"):
                yield Button(
                    literal.shown(f"{self._confirm_label} (y)"),
                    id="confirm-yes",
                    variant="error" if self._danger else "primary",
                )
                yield Button("Cancel (n)", id="confirm-no")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

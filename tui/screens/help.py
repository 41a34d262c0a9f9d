"""The ? / F1 help: what the current view shows, and every key that works there now."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import ActiveBinding, Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Markdown, Static

from eagle_tui.tui.render import literal

CLOSE_HINT = "esc, ? or F1 closes this help"
# Textual's own binding: not among the view's bindings, so the key table would leave it out
PALETTE_HINT = "      ctrl+p  command palette: every view and action by name"


class HelpScreen(ModalScreen[None]):
    """A modal with the view's help text and its key table; any of ? F1 Esc q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,f1,q", "dismiss", "Close help", id="help.close"),
    ]

    def __init__(self, title: str, help_text: str, keys: Content) -> None:
        super().__init__()
        self._title = title
        self._help_text = help_text
        self._keys = keys

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Static(literal.styled(f"{self._title} — help", "bold"), id="help-title")
            yield Static(CLOSE_HINT, id="help-close", markup=False)
            yield Markdown(self._help_text, id="help-text")
            yield Static(literal.styled("Keys", "bold"), classes="help-section")
            yield Static(self._keys, id="help-keys")  # literal: keys_table
            yield Static(PALETTE_HINT, id="help-palette", markup=False)

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(result)


def keys_table(bindings: Iterable[ActiveBinding], key_display: Callable[[Binding], str]) -> Content:
    """One line per binding that has a description: ``key  description`` (dimmed if off)."""
    lines: list[Content] = []
    seen: set[str] = set()
    for active in bindings:
        binding = active.binding
        if not binding.description or binding.action in seen:
            continue
        seen.add(binding.action)
        key = key_display(binding)
        style = "" if active.enabled else "$text-disabled"
        lines.append(
            literal.assemble((f"{key:>12}", "bold $accent"), "  ", (binding.description, style))
        )
    return Content("\n").join(lines)

"""The ? / F1 help: every key that works in the current view now, then what the view shows.

The key table comes first and is laid out in as many columns as the width allows (one key
per action, its other keys beside it; the five view keys as one line), so at 80x24 it is
all above the fold; the view's prose follows and scrolls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import ActiveBinding, Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Markdown, Static

from eagle_tui.tui.render import literal

CLOSE_HINT = "esc, ? or F1 closes this help"
# Textual's own binding: not among the view's bindings, so the key table would leave it out
PALETTE_HINT = "      ctrl+p  command palette: every view and action by name"
COLUMN_GAP = 3
VIEW_ACTION = "view("
"""The app's view-switching bindings (``1``–``5``): one line in the table, not five."""


@dataclass(frozen=True, slots=True)
class KeyEntry:
    """One line of the key table: the keys of one action, what it does, whether it
    applies now."""

    keys: str
    description: str
    enabled: bool = True


class HelpScreen(ModalScreen[None]):
    """A modal with the view's key table and its help text; any of ? F1 Esc q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,f1,q", "dismiss", "Close help", id="help.close"),
    ]

    def __init__(self, title: str, help_text: str, keys: Sequence[KeyEntry]) -> None:
        super().__init__()
        self._title = title
        self._help_text = help_text
        self._keys = tuple(keys)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            with Horizontal(id="help-head"):
                yield Static(literal.styled(f"{self._title} — help", "bold"), id="help-title")
                yield Static(CLOSE_HINT, id="help-close", markup=False)
            yield KeyTable(self._keys, id="help-keys")
            yield Static(literal.styled("About this view", "bold"), classes="help-section")
            yield Markdown(self._help_text, id="help-text")
            yield Static(PALETTE_HINT, id="help-palette", markup=False)

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(result)


class KeyTable(Widget):
    """The key table in columns: as many as fit the width, filled top to bottom."""

    DEFAULT_CSS = """
    KeyTable { height: auto; }
    """

    def __init__(self, entries: Sequence[KeyEntry], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.entries = tuple(entries)

    def layout_for(self, width: int) -> tuple[int, int, int]:
        """``(columns, key width, description width)`` for ``width`` cells: two columns
        whenever two fit with descriptions of 12 cells or more (longer ones are clipped)."""
        if not self.entries:
            return 1, 0, 0
        key_w = max(len(e.keys) for e in self.entries)
        desc_w = max(len(e.description) for e in self.entries)
        full = key_w + 2 + desc_w
        columns = max(1, (width + COLUMN_GAP) // (full + COLUMN_GAP))
        if columns == 1:
            two = (width - COLUMN_GAP) // 2 - key_w - 2
            if two >= 12:
                return 2, key_w, min(desc_w, two)
        return columns, key_w, desc_w

    def rows_for(self, width: int) -> int:
        """How many lines the table takes at ``width`` cells."""
        columns = self.layout_for(width)[0]
        return -(-len(self.entries) // columns)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return self.rows_for(width)

    def render(self) -> Content:
        width = self.content_region.width or self.size.width
        columns, key_w, desc_w = self.layout_for(width)
        rows = self.rows_for(width)
        lines: list[Content] = []
        for row in range(rows):
            cells = [self._cell(self.entries[i], key_w, desc_w, last=column == columns - 1)
                     for column in range(columns)
                     if (i := column * rows + row) < len(self.entries)]
            lines.append(literal.content(" " * COLUMN_GAP).join(cells))
        return Content("\n").join(lines)

    @staticmethod
    def _cell(entry: KeyEntry, key_w: int, desc_w: int, *, last: bool) -> Content:
        description = entry.description
        if len(description) > desc_w:
            description = description[: max(desc_w - 1, 0)] + "…"
        if not last:
            description = description.ljust(desc_w)
        style = "" if entry.enabled else "$text-disabled"
        return literal.assemble((entry.keys.rjust(key_w), "bold $accent"), "  ",
                                (description, style))


def key_entries(bindings: Iterable[ActiveBinding],
                key_display: Callable[[Binding], str]) -> list[KeyEntry]:
    """One entry per action that has a description, its keys together (``q ^q Quit``);
    the view keys as one entry (``1-5 Switch view``)."""
    keys: dict[str, list[str]] = {}
    described: dict[str, ActiveBinding] = {}
    views: list[str] = []
    for active in bindings:
        binding = active.binding
        if not binding.description:
            continue
        shown = key_display(binding)
        if binding.action.startswith(VIEW_ACTION):
            views.append(shown)
            continue
        described.setdefault(binding.action, active)
        if shown not in keys.setdefault(binding.action, []):
            keys[binding.action].append(shown)
    entries = [KeyEntry(" ".join(keys[action]), active.binding.description, active.enabled)
               for action, active in described.items()]
    if views:
        span = f"{views[0]}-{views[-1]}" if len(views) > 1 else views[0]
        entries.append(KeyEntry(span, "Switch view"))
    return entries

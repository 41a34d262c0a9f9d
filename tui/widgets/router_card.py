"""The router part of a server card: its workers with state, load, running and queued.

Mounted into a ``ServerCard`` when its server turns out to be SGLang's router; each worker
also gets a card of its own below (its start-up watched like a directly watched server).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import Static

from eagle_tui.tui.render import literal
from eagle_tui.tui.render.router import RouterDoc, router_lines

if TYPE_CHECKING:
    from eagle_tui.core.sglang.router import RouterView


class RouterWorkers(Static):
    """Literal lines: how many workers can serve, then one line per worker."""

    DEFAULT_CSS = """
    RouterWorkers {
        height: auto;
        color: $text;
    }
    """

    def __init__(self) -> None:
        super().__init__("", classes="card-router", markup=False)
        self.view: RouterView | None = None

    def show(self, view: RouterView) -> None:
        """Replace the lines with ``view``'s."""
        self.view = view
        lines = [line.removeprefix("  ") for line in router_lines(RouterDoc.of(view))]
        self.update(literal.lines(lines))

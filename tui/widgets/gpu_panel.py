"""The Server view's GPU panel: one line per GPU of the selected server's host."""

from __future__ import annotations

from textual.widgets import Static

from eagle_tui.tui.render import literal


class GpuPanel(Static):
    """Shows the lines of ``tui.render.gpu``; hidden when there are none."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self.lines: tuple[str, ...] = ()
        self.display = False

    def show_lines(self, lines: list[str], *, wanted: bool = True) -> None:
        """Show ``lines`` (literal text) when there are any and the panel is wanted."""
        if tuple(lines) != self.lines:
            self.lines = tuple(lines)
            self.update(literal.lines(lines))
        self.display = wanted and bool(lines)

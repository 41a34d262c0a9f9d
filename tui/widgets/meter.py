"""A one-line bar: a filled fraction, an optional marker (an expected window), and a label.

``Meter`` draws ``███████░░░│░░  label``: the fill is ``fraction`` of the bar, the ``│``
sits at ``marker`` (both 0..1 of the bar's full scale), and the fill turns to the warning
style once it passes the marker. ``tui.render.meter`` holds the values and their scale.
"""

from __future__ import annotations

from typing import ClassVar

from textual.content import Content
from textual.reactive import reactive
from textual.style import Style
from textual.widget import Widget

from eagle_tui.tui.render import literal
from eagle_tui.tui.render.meter import EMPTY, EMPTY_METER, FILL, MARK, MeterValue, bar_cells
from eagle_tui.tui.widgets.styling import component_style


class Meter(Widget):
    """Renders a ``MeterValue`` across its width; the label takes what the bar leaves."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "meter--fill",
        "meter--over",
        "meter--empty",
        "meter--mark",
    }

    value: reactive[MeterValue] = reactive(EMPTY_METER)

    def __init__(
        self, value: MeterValue = EMPTY_METER, *, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.set_reactive(Meter.value, value)

    def render(self) -> Content:
        value = self.value
        label = f" {value.label}" if value.label else ""
        width = max(4, self.size.width - len(label))
        filled, mark = bar_cells(value.fraction, value.marker, width)
        return literal.assemble(*self._bar_parts(filled, mark, width), label)

    def _bar_parts(self, filled: int, mark: int | None, width: int) -> list[tuple[str, Style]]:
        runs: list[tuple[str, str]] = []
        for cell in range(width):
            if cell == mark:
                runs.append((MARK, "meter--mark"))
            elif cell < filled:
                over = mark is not None and cell > mark
                runs.append((FILL, "meter--over" if over else "meter--fill"))
            else:
                runs.append((EMPTY, "meter--empty"))
        return [(text, component_style(self, name)) for text, name in _merge(runs)]


def _merge(parts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Join neighbouring cells of one component class into one run."""
    merged: list[tuple[str, str]] = []
    for text, style in parts:
        if merged and merged[-1][1] == style:
            merged[-1] = (merged[-1][0] + text, style)
        else:
            merged.append((text, style))
    return merged

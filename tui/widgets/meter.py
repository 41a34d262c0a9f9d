"""A one-line bar: a filled fraction, an optional marker (an expected window), and a label.

``Meter`` draws ``███████░░░│░░  label``: the fill is ``fraction`` of the bar, the ``│``
sits at ``marker`` (both 0..1 of the bar's full scale), and the fill turns to the warning
style once it passes the marker. ``window_scale`` computes both for elapsed-vs-window bars.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.content import Content
from textual.reactive import reactive
from textual.style import Style
from textual.widget import Widget

from eagle_tui.tui.widgets.styling import component_style

FILL = "█"
EMPTY = "░"
MARK = "│"


@dataclass(frozen=True)
class MeterValue:
    """What a meter shows. ``fraction`` None draws an empty bar (unknown)."""

    fraction: float | None
    label: str = ""
    marker: float | None = None


EMPTY_METER = MeterValue(None)


def window_scale(
    elapsed_s: float | None, window_s: float | None
) -> tuple[float | None, float | None]:
    """(fill, marker) for an elapsed time against an expected window.

    The full scale is 1.25 × the window, stretched when elapsed goes past it, so the marker
    stays visible and an overrun shows as fill beyond it.
    """
    if elapsed_s is None or not window_s or window_s <= 0:
        return None, None
    scale = max(window_s * 1.25, elapsed_s * 1.05)
    return elapsed_s / scale, window_s / scale


def bar_cells(fraction: float | None, marker: float | None, width: int) -> tuple[int, int | None]:
    """(filled cells, marker cell) for a bar ``width`` cells wide."""
    filled = 0 if fraction is None else round(max(0.0, min(1.0, fraction)) * width)
    mark = None if marker is None else min(width - 1, max(0, round(marker * width)))
    return filled, mark


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
        return Content.assemble(*self._bar_parts(filled, mark, width), label)

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

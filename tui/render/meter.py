"""What a one-line meter shows, and the scale of elapsed-vs-window bars (pure values).

``tui.widgets.meter.Meter`` draws a ``MeterValue``: ``███████░░░│░░  label``.
"""

from __future__ import annotations

from dataclasses import dataclass

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

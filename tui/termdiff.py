"""Write only the cells that changed: a shadow of the terminal, and updates diffed against it.

Textual repaints whole widget regions: a card whose clock ticks re-sends every line of the
card, a log that gains a line re-sends the whole pane, a layout change re-sends the whole
screen, each styled run as ``ESC[…m text ESC[0m``. Over a slow SSH link that is most of the
bandwidth. ``FrameDiff`` keeps what the terminal shows (one ``(char, style)`` per cell) and
turns each compositor update into the cursor moves and text of the cells that differ,
with one SGR sequence per change of style. Nearby changes on a line are joined when
re-sending the cells between them is cheaper than another cursor move.

A block of lines that moved up (a log gaining lines, a stream's text wrapping) is moved
with the terminal's own scrolling inside margins, so only the new lines are sent.

The shadow is only right while nothing else writes cells to the terminal: ``reset`` forgets
it (after a resize, or on ctrl+l), and the next frame is sent whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from rich.cells import get_character_cell_size
from rich.color import ColorSystem
from rich.style import Style
from textual._compositor import ChopsUpdate, CompositorUpdate, LayoutUpdate
from textual.strip import Strip

Cell = tuple[str, Style | None]
WIDE_TAIL = ""
"""The second cell of a double-width character (its text is in the first)."""
JOIN_GAP = 8
"""Unchanged cells between two changed runs that are re-sent rather than skipped with a
cursor move (``ESC[y;xH`` costs about this much)."""
RESET = "\x1b[0m"
MIN_SCROLL_LINES = 3
"""Lines a scroll must put in place before it is used instead of redrawing them."""
MAX_SCROLL = 40


class DiffUpdate(CompositorUpdate):
    """Terminal sequences already computed by ``FrameDiff`` (what ``_display`` writes)."""

    def __init__(self, sequences: str) -> None:
        self.sequences = sequences

    def render_segments(self, console: object) -> str:
        return self.sequences


class FrameDiff:
    """What the terminal shows; ``diff`` turns an update into the changed cells only."""

    def __init__(self) -> None:
        self._lines: dict[int, list[Cell | None]] = {}
        self._width = 0
        self.cells_sent = 0
        self.lines_scrolled = 0

    def reset(self) -> None:
        """Forget what the terminal shows: the next update is sent whole."""
        self._lines.clear()

    def diff(
        self, update: CompositorUpdate, width: int, color_system: ColorSystem
    ) -> CompositorUpdate | None:
        """The sequences that bring the terminal from the shadow to ``update`` (None when
        nothing changed); the shadow then holds ``update``. An update of another kind
        (inline) is returned as it is, and the shadow forgotten."""
        if width != self._width:
            self.reset()
            self._width = width
        lines = self._new_cells(update)
        if lines is None:
            self.reset()
            return update
        merged: dict[int, list[tuple[int, list[Cell]]]] = {}
        for y, pieces in lines:  # a line may come in several spans
            merged.setdefault(y, []).extend(pieces)
        targets = {y: self._target(y, pieces) for y, pieces in merged.items()}
        out = self._scroll(targets)
        for y in sorted(targets):
            out.extend(self._line_changes(y, targets[y], color_system))
        return DiffUpdate("".join(out)) if out else None

    # -- updates to cells --------------------------------------------------------------------

    def _new_cells(
        self, update: CompositorUpdate
    ) -> list[tuple[int, list[tuple[int, list[Cell]]]]] | None:
        if isinstance(update, LayoutUpdate):
            x0, y0 = update.region.x, update.region.y
            return [
                (y, [(x0, strip_cells(line))]) for y, line in enumerate(update.strips, y0)
            ]
        if isinstance(update, ChopsUpdate):
            return list(_chop_cells(update))
        return None

    def _line(self, y: int) -> list[Cell | None]:
        line = self._lines.setdefault(y, [])
        if len(line) < self._width:
            line.extend([None] * (self._width - len(line)))
        return line

    def _target(self, y: int, pieces: list[tuple[int, list[Cell]]]) -> list[Cell | None]:
        """Line ``y`` as it must look after this update (what it shows, with ``pieces``)."""
        line: list[Cell | None] = list(self._line(y))
        for x, cells in pieces:
            end = min(x + len(cells), self._width)
            line[x:end] = cells[: end - x]
        return line

    def _scroll(self, targets: dict[int, list[Cell | None]]) -> list[str]:
        """Scroll blocks of lines that moved up (a log gaining lines) with the terminal's own
        scrolling: a handful of bytes instead of every cell of the block."""
        out: list[str] = []
        for top, bottom in _changed_blocks(targets, self._lines):
            shift = self._best_shift(targets, top, bottom)
            if shift is None:
                continue
            # Margins top..bottom, line feeds at the bottom margin scroll just that block
            # (DECSTBM and LF: every VT100-like terminal has them), then margins off.
            out.append(f"\x1b[{top + 1};{bottom + 1}r\x1b[{bottom + 1};1H" + "\n" * shift)
            out.append("\x1b[r")
            moved = [self._line(y) for y in range(top + shift, bottom + 1)]
            for y, line in enumerate(moved, top):
                self._lines[y] = list(line)
            for y in range(bottom - shift + 1, bottom + 1):
                self._lines[y] = [None] * self._width
            self.lines_scrolled += bottom - top + 1 - shift
        return out

    def _best_shift(
        self, targets: dict[int, list[Cell | None]], top: int, bottom: int
    ) -> int | None:
        """The upward shift that makes the most lines of ``top..bottom`` already right, if
        scrolling pays (at least ``MIN_SCROLL_LINES`` lines and more than without it)."""
        if bottom - top + 1 < MIN_SCROLL_LINES:
            return None
        if any(None in targets[y] for y in range(top, bottom + 1)):
            return None  # a cell nobody drew: keep the plain diff
        best, best_matches = None, 0
        for shift in range(1, min(MAX_SCROLL, bottom - top) + 1):
            matches = sum(
                1
                for y in range(top, bottom + 1 - shift)
                if targets[y] == self._lines.get(y + shift)
            )
            if matches > best_matches:
                best, best_matches = shift, matches
        return best if best_matches >= MIN_SCROLL_LINES else None

    def _line_changes(
        self, y: int, target: list[Cell | None], color_system: ColorSystem
    ) -> Iterator[str]:
        old = self._line(y)
        if old == target:
            return
        runs = _changed_runs(old, target)
        for start, stop in runs:
            old[start:stop] = target[start:stop]
        for start, stop in runs:
            start, stop = _whole_characters(old, start, stop)
            self.cells_sent += stop - start
            yield f"\x1b[{y + 1};{start + 1}H"
            yield render_cells(old[start:stop], color_system)


def strip_cells(strips: Iterable[Strip]) -> list[Cell]:
    """One ``(char, style)`` per terminal cell of ``strips`` laid end to end."""
    cells: list[Cell] = []
    for strip in strips:
        for text, style, control in strip:
            if control:
                continue
            if text.isascii():
                cells.extend([(char, style) for char in text])
            else:
                _add_wide(cells, text, style)
    return cells


def _add_wide(cells: list[Cell], text: str, style: Style | None) -> None:
    for char in text:
        size = get_character_cell_size(char)
        if size == 1:
            cells.append((char, style))
        elif size == 2:
            cells.append((char, style))
            cells.append((WIDE_TAIL, style))
        elif cells:  # zero width (a combining mark): part of the previous cell
            previous, previous_style = cells[-1]
            cells[-1] = (previous + char, previous_style)


def _chop_cells(update: ChopsUpdate) -> Iterator[tuple[int, list[tuple[int, list[Cell]]]]]:
    """Per line of a partial update, each chop's cells cropped to the span's ``[x1, x2)``."""
    for y, x1, x2 in update.spans:
        pieces: list[tuple[int, list[Cell]]] = []
        for end, (x, strip) in zip(update.chop_ends[y], update.chops[y].items(), strict=False):
            if strip is None or x >= x2 or end <= x1:
                continue
            cells = strip_cells((strip,))
            start = max(x, x1)
            cells = cells[start - x : min(end, x2) - x]
            if cells:
                pieces.append((start, cells))
        yield y, pieces


def _changed_runs(old: Sequence[Cell | None], new: Sequence[Cell | None]) -> list[list[int]]:
    """``[start, stop)`` of the known cells that differ, joined across short gaps (a gap
    holding a cell nobody drew is never joined over)."""
    runs: list[list[int]] = []
    for at, cell in enumerate(new):
        if cell is None or old[at] == cell:
            continue
        if runs and at - runs[-1][1] <= JOIN_GAP and None not in new[runs[-1][1] : at]:
            runs[-1][1] = at + 1
        else:
            runs.append([at, at + 1])
    return runs


def _changed_blocks(
    targets: dict[int, list[Cell | None]], shown: dict[int, list[Cell | None]]
) -> list[tuple[int, int]]:
    """Runs of consecutive lines that change in this update, as ``(top, bottom)``."""
    blocks: list[tuple[int, int]] = []
    for y in sorted(targets):
        if targets[y] == shown.get(y):
            continue
        if blocks and blocks[-1][1] == y - 1:
            blocks[-1] = (blocks[-1][0], y)
        else:
            blocks.append((y, y))
    return blocks


def _whole_characters(line: Sequence[Cell | None], start: int, stop: int) -> tuple[int, int]:
    """Widen ``[start, stop)`` so no double-width character is cut in half."""
    if start > 0 and _text(line[start]) == WIDE_TAIL:
        start -= 1
    if stop < len(line) and _text(line[stop]) == WIDE_TAIL:
        stop += 1
    return start, stop


def _text(cell: Cell | None) -> str | None:
    return None if cell is None else cell[0]


def render_cells(cells: Sequence[Cell | None], color_system: ColorSystem) -> str:
    """The cells as text with one SGR sequence per change of style, ending reset."""
    out: list[str] = []
    current: Style | bool | None = False  # False: unknown (before the first cell)
    link: str | None = None
    for cell in cells:
        text, style = cell if cell is not None else (" ", None)
        if style is not current:
            if style != current:
                out.append(_sgr(style, color_system))
            current = style
            cell_link = style.link if style is not None else None
            if cell_link != link:
                out.append(_link(style) if cell_link else "\x1b]8;;\x1b\\")
                link = cell_link
        out.append(text)
    if link:
        out.append("\x1b]8;;\x1b\\")
    out.append(RESET)
    return "".join(out)


def _sgr(style: Style | None, color_system: ColorSystem) -> str:
    if style is None:
        return RESET
    ansi = Strip.render_ansi(style, color_system) if style._ansi is None else style._ansi
    return f"\x1b[0;{ansi}m" if ansi else RESET


def _link(style: Style | None) -> str:
    assert style is not None
    return f"\x1b]8;id={style._link_id};{style.link}\x1b\\"

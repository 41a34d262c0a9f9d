"""Write only the cells that changed: the terminal sequences the dashboard writes, read back
into a shadow screen, and only the differences passed on.

Textual repaints whole widget regions: a card whose clock ticks re-sends every line of the
card, a log that gains a line re-sends the whole pane, a layout change re-sends the whole
screen, each styled run as ``ESC[…m text ESC[0m``. Over a slow SSH link that is most of the
bandwidth. ``TerminalDiff`` reads what would be written (cursor positions, SGR colours,
hyperlinks, text, synchronized-update markers: the terminal protocol, not Textual's code)
into the cells they paint, keeps what the terminal shows (``Shadow``: one ``(text, pen)``
per cell) and writes only the cells that differ, with one SGR sequence per change of
style. Nearby changes on a line are joined when re-sending the cells between them is
cheaper than another cursor move. A block of lines that moved up (a log gaining lines, a
stream's text wrapping) is moved with the terminal's own scrolling inside margins, so only
the new lines are sent.

Anything else (mode switches, clipboard writes, a sequence it does not know) is passed on
in order, with the cursor and colours put back first where the stream had them; what may
change cells it does not know (the alternate screen, erasing, scrolling, text past the
margin) also makes it forget the shadow, so the next cells are sent whole. ``reset``
forgets it too (ctrl+l), as does a change of size.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from rich.cells import split_graphemes

Pen = tuple[str, str]
"""How a cell is drawn: the SGR parameters since the last reset, and the hyperlink
(``params;url`` of OSC 8, ``""`` for none)."""
Cell = tuple[str, Pen]
Pieces = dict[int, list[tuple[int, list[Cell]]]]
"""Per line, the runs of cells painted at a column, in the order they were painted."""

WIDE_TAIL = ""
"""The second cell of a double-width character (its text is in the first)."""
JOIN_GAP = 8
"""Unchanged cells between two changed runs that are re-sent rather than skipped with a
cursor move (``ESC[y;xH`` costs about this much)."""
RESET = "\x1b[0m"
CLOSE_LINK = "\x1b]8;;\x1b\\"
SYNC_START = "\x1b[?2026h"
SYNC_END = "\x1b[?2026l"
MIN_SCROLL_LINES = 3
"""Lines a scroll must put in place before it is used instead of redrawing them."""
MAX_SCROLL = 40
MAX_PENS = 4096

TOKEN = re.compile(
    r"(?P<text>[^\x00-\x1f\x7f-\x9f]+)"
    r"|\x1b\[(?P<sgr>[0-9;:]*)m"
    r"|\x1b\[(?P<row>\d*)(?:;(?P<column>\d*))?H"
    r"|\x1b\[(?P<csi>[0-?]*[ -/]*[@-~])"
    r"|\x1b\](?P<osc>[^\x07\x1b]*)(?:\x07|\x1b\\)"
    r"|(?P<other>\x1b[^\[\]]?|[\x00-\x1f\x7f-\x9f])",
    re.DOTALL,
)
INCOMPLETE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?)?\Z")
"""An escape sequence cut at the end of a write (kept for the next one)."""
CELL_NEUTRAL_MODES = frozenset(
    {"25", "1000", "1002", "1003", "1004", "1005", "1006", "1015", "1016", "2004", "2048"}
)
"""DEC private modes that change no cell (cursor visibility, mouse and focus reports,
bracketed paste, in-band resize): switched without forgetting the shadow."""
CELL_NEUTRAL_OSC = ("0;", "1;", "2;", "22;", "52;")
"""Window titles, pointer shape, clipboard."""
RESTORES_COLOURS = frozenset({"\x1b8", "\x1bc", "\x1b[!p", "\x1b[?1048l", "\x1b[?1049l"})
"""Besides SGR, what sets the colours: restore cursor (with its attributes), full and soft
reset, leaving the alternate screen (a restore)."""


class Shadow:
    """What the terminal shows, one ``Cell`` (or None: not known) per position; ``changes``
    brings the terminal to what was painted and remembers it."""

    def __init__(self) -> None:
        self._lines: dict[int, list[Cell | None]] = {}
        self.width = 0
        self.cells_sent = 0
        self.lines_scrolled = 0

    def reset(self, width: int | None = None) -> None:
        """Forget what the terminal shows: the next cells are sent whole."""
        self._lines.clear()
        if width is not None:
            self.width = width

    def forget(self, y: int, start: int, stop: int) -> None:
        """Cells ``start..stop`` of line ``y`` are no longer known (with their neighbours: a
        double-width character half overwritten)."""
        line = self._line(y)
        start, stop = max(0, start - 1), min(stop + 1, len(line))
        line[start:stop] = [None] * (stop - start)

    def changes(self, pieces: Pieces) -> list[str]:
        """The sequences that bring the terminal from the shadow to the shadow with
        ``pieces`` painted on it (empty when nothing changes); the shadow then holds it."""
        targets = {y: self._target(y, runs) for y, runs in pieces.items()}
        out = self._scroll(targets)
        for y in sorted(targets):
            out.extend(self._line_changes(y, targets[y]))
        return out

    def _line(self, y: int) -> list[Cell | None]:
        line = self._lines.setdefault(y, [])
        if len(line) < self.width:
            line.extend([None] * (self.width - len(line)))
        return line

    def _target(self, y: int, runs: list[tuple[int, list[Cell]]]) -> list[Cell | None]:
        """Line ``y`` as it must look after this update (what it shows, with ``runs``)."""
        line: list[Cell | None] = list(self._line(y))
        for x, cells in runs:
            end = min(x + len(cells), self.width)
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
            out.append(f"{RESET}\x1b[{top + 1};{bottom + 1}r\x1b[{bottom + 1};1H" + "\n" * shift)
            out.append("\x1b[r")
            moved = [self._line(y) for y in range(top + shift, bottom + 1)]
            for y, line in enumerate(moved, top):
                self._lines[y] = list(line)
            for y in range(bottom - shift + 1, bottom + 1):
                self._lines[y] = [None] * self.width
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

    def _line_changes(self, y: int, target: list[Cell | None]) -> Iterator[str]:
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
            yield render_cells(old[start:stop])


@dataclass
class StreamState:
    """Where a stream of terminal sequences stands: cursor (``x``, ``y``), SGR parameters
    since the last reset, open hyperlink; None where an unknown sequence may have changed
    it."""

    x: int | None = None
    y: int | None = None
    sgr: str | None = ""
    """Reset at first, as Textual's own output assumes (its first run sets only what it
    needs)."""
    link: str | None = ""

    def at(self) -> tuple[int, int] | None:
        return None if self.x is None or self.y is None else (self.x, self.y)


class TerminalDiff:
    """Reads each write to the terminal and returns what to write instead: the cells that
    changed, and everything it does not paint itself passed on in order."""

    def __init__(self, size: Callable[[], tuple[int, int]]) -> None:
        self.shadow = Shadow()
        self._size = size
        self._height = 0
        self._stream = StreamState()
        """Where the stream being read stands."""
        self._shown = StreamState()
        """Where the terminal stands after what was written to it."""
        self._painted: Pieces = {}
        self._placed = False
        """The stream's last cursor change was an explicit move (Textual's cursor)."""
        self._tail = ""
        self._sync = "off"  # "held": start seen, nothing written yet; "sent"
        self._out: list[str] = []
        self._pens: dict[Pen, Pen] = {}
        self._last_pen: Pen = ("", "")

    def reset(self) -> None:
        """Forget what the terminal shows: the next cells are sent whole."""
        self.shadow.reset()

    @property
    def cells_sent(self) -> int:
        return self.shadow.cells_sent

    @property
    def lines_scrolled(self) -> int:
        return self.shadow.lines_scrolled

    def feed(self, data: str) -> str:
        """What to write to the terminal for ``data`` (possibly nothing)."""
        self._check_size()
        data = self._tail + data
        end = _complete_end(data)
        self._tail = data[end:]
        for match in TOKEN.finditer(data, 0, end):
            self._token(match)
        self._flush()
        self._place_cursor()
        out, self._out = "".join(self._out), []
        return out

    # -- reading the stream ----------------------------------------------------------------

    def _check_size(self) -> None:
        width, height = self._size()
        if (width, height) != (self.shadow.width, self._height):
            self.shadow.reset(width)
            self._height = height

    def _token(self, match: re.Match[str]) -> None:
        kind = match.lastgroup
        value = match.group(kind or 0)
        if kind == "text":
            self._text(value)
        elif kind == "sgr":
            self._select_graphics(value, match.group())
        elif kind in ("row", "column"):
            self._move(int(match["row"] or 1) - 1, int(match["column"] or 1) - 1)
        elif kind == "csi":
            self._csi(value, match.group())
        elif kind == "osc":
            self._osc(value, match.group())
        elif value == "\n":
            self._line_feed()
        elif value == "\r" and self._stream.x is not None:
            self._stream.x = 0
        elif value == "\x07":
            self._pass(value)
        else:
            self._unknown(value)

    def _csi(self, body: str, raw: str) -> None:
        if body == "?2026h":
            self._sync = "held" if self._sync == "off" else self._sync
        elif body == "?2026l":
            self._end_sync()
        elif _cell_neutral(body):
            self._pass(raw)
        else:
            self._unknown(raw)

    def _osc(self, body: str, raw: str) -> None:
        if body.startswith("8;"):
            _params, _, url = body[2:].partition(";")
            self._stream.link = body[2:] if url else ""
        elif body.startswith(CELL_NEUTRAL_OSC):
            self._pass(raw)
        else:
            self._unknown(raw)

    def _select_graphics(self, params: str, raw: str) -> None:
        first, _, rest = params.partition(";")
        if first in ("", "0"):
            self._stream.sgr = rest
        elif self._stream.sgr is not None:
            self._stream.sgr = f"{self._stream.sgr};{params}" if self._stream.sgr else params
        else:
            self._pass(raw)  # colours still unknown: the terminal follows the stream

    def _move(self, y: int, x: int) -> None:
        self._stream.y = max(0, min(y, self._height - 1))
        self._stream.x = max(0, min(x, self.shadow.width - 1))
        self._placed = True

    def _line_feed(self) -> None:
        y = self._stream.y
        if y is None or y + 1 >= self._height:
            self._unknown("\n")  # at the bottom a line feed scrolls the screen
        else:
            self._stream.y = y + 1

    def _text(self, text: str) -> None:
        pen = self._pen()
        x, y = self._stream.x, self._stream.y
        cells = _cells(text, pen or ("", ""))
        if x is None or y is None or cells is None or x + len(cells) > self.shadow.width:
            self._raw_text(text, None)
            return
        if pen is None:
            self._raw_text(text, len(cells))
            return
        runs = self._painted.setdefault(y, [])
        if runs and runs[-1][0] + len(runs[-1][1]) == x:
            runs[-1][1].extend(cells)
        else:
            runs.append((x, cells))
        self._stream.x = x + len(cells)
        self._placed = False

    def _pen(self) -> Pen | None:
        """The stream's pen, one object per distinct pen (cells compare by identity first)."""
        sgr, link = self._stream.sgr, self._stream.link
        if sgr is None or link is None:
            return None
        last = self._last_pen
        if last[0] == sgr and last[1] == link:
            return last
        if len(self._pens) > MAX_PENS:
            self._pens.clear()
        pen = self._last_pen = self._pens.setdefault((sgr, link), (sgr, link))
        return pen

    # -- writing ---------------------------------------------------------------------------

    def _emit(self, text: str) -> None:
        if self._sync == "held":
            self._out.append(SYNC_START)
            self._sync = "sent"
        self._out.append(text)

    def _flush(self) -> None:
        """Write the cells painted so far that differ from the shadow."""
        if not self._painted:
            return
        changes = self.shadow.changes(self._painted)
        self._painted = {}
        if changes:
            self._emit("".join(changes))
            self._shown = StreamState(sgr="", link="")  # each run ends reset; the cursor moved

    def _place_cursor(self) -> None:
        """Put the cursor where the stream last placed it (where Textual wants it)."""
        at = self._stream.at()
        if self._placed and at is not None and at != self._shown.at():
            self._emit(f"\x1b[{at[1] + 1};{at[0] + 1}H")
            self._shown.x, self._shown.y = at

    def _end_sync(self) -> None:
        self._flush()
        if self._sync == "sent":
            self._out.append(SYNC_END)
        self._sync = "off"

    def _pass(self, raw: str) -> None:
        """Pass on a sequence that changes no cell, in order."""
        self._flush()
        self._emit(raw)

    def _unknown(self, raw: str) -> None:
        """Pass on a sequence that may change cells or the cursor, where the stream had the
        cursor and colours; what it may change is unknown from then on."""
        self._flush()
        self._align()
        self._emit(raw)
        self.shadow.reset()
        self._stream.x = self._stream.y = None
        if raw in RESTORES_COLOURS:
            self._stream.sgr = None
        self._shown = replace(self._stream)

    def _raw_text(self, text: str, width: int | None) -> None:
        """Text the shadow cannot hold (colours unknown), over ``width`` cells from the
        cursor; None: where it lands is not known (cursor unknown, past the margin)."""
        self._flush()
        self._align()
        self._emit(text)
        x, y = self._stream.x, self._stream.y
        if width is None or x is None or y is None:
            self.shadow.reset()
            self._stream.x = self._stream.y = None
        else:
            self.shadow.forget(y, x, x + width)
            self._stream.x = x + width
        self._shown = replace(self._stream)

    def _align(self) -> None:
        """Bring the terminal's cursor, colours and link to where the stream has them (what
        is unknown in the stream is already the same on the terminal)."""
        stream, shown = self._stream, self._shown
        at = stream.at()
        if at is not None and at != shown.at():
            self._emit(f"\x1b[{at[1] + 1};{at[0] + 1}H")
        if stream.sgr is not None and stream.sgr != shown.sgr:
            self._emit(f"\x1b[0;{stream.sgr}m" if stream.sgr else RESET)
        if stream.link is not None and stream.link != shown.link:
            self._emit(f"\x1b]8;{stream.link}\x1b\\" if stream.link else CLOSE_LINK)


def _complete_end(data: str) -> int:
    """Where the complete sequences of ``data`` end: before an escape sequence cut at the
    end (an OSC's text may end in the ESC of its terminator: look one ESC further back)."""
    start = data.rfind("\x1b")
    if start == len(data) - 1 and start > 0:
        start = max(data.rfind("\x1b", 0, start), 0)
    if start < 0:
        return len(data)
    cut = INCOMPLETE.search(data, start)
    return cut.start() if cut else len(data)


def _cell_neutral(body: str) -> bool:
    """DEC private mode switches, mode queries and keyboard-protocol sequences that change
    no cell."""
    if body.startswith("?") and body[-1] in "hl":
        return all(mode in CELL_NEUTRAL_MODES for mode in body[1:-1].split(";"))
    return body.endswith("$p") or (body[:1] in "<>=" and body.endswith("u"))


def _cells(text: str, pen: Pen) -> list[Cell] | None:
    """One cell per terminal column of ``text``; None when a character has no cell to
    join (a combining mark first)."""
    if text.isascii():
        return [(char, pen) for char in text]
    cells: list[Cell] = []
    spans, _ = split_graphemes(text)
    for start, end, width in spans:
        grapheme = text[start:end]
        if width == 0:
            if not cells:
                return None
            previous, previous_pen = cells[-1]
            cells[-1] = (previous + grapheme, previous_pen)
            continue
        cells.append((grapheme, pen))
        if width == 2:
            cells.append((WIDE_TAIL, pen))
    return cells


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


def render_cells(cells: Sequence[Cell | None]) -> str:
    """The cells as text with one SGR sequence per change of style, ending reset."""
    out: list[str] = []
    current: Pen | None = None
    link = ""
    for cell in cells:
        text, pen = cell if cell is not None else (" ", ("", ""))
        if pen is not current:
            sgr, cell_link = pen
            if current is None or sgr != current[0]:
                out.append(f"\x1b[0;{sgr}m" if sgr else RESET)
            if cell_link != link:
                out.append(f"\x1b]8;{cell_link}\x1b\\" if cell_link else CLOSE_LINK)
                link = cell_link
            current = pen
        out.append(text)
    if link:
        out.append(CLOSE_LINK)
    out.append(RESET)
    return "".join(out)

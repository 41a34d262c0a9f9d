"""Only changed cells are written, and the terminal ends up showing exactly what Textual's
own full output would show: both are replayed on a terminal emulator (pyte) and compared
cell by cell, styles included, over random frames with wide characters and links."""

from __future__ import annotations

import random

import pyte
from rich.color import ColorSystem
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual._compositor import ChopsUpdate, LayoutUpdate
from textual.geometry import Region
from textual.strip import Strip

from eagle_tui.tui.termdiff import FrameDiff

W, H = 40, 8
STYLES = (
    None,
    Style(color="red"),
    Style(color="#00ff00", bgcolor="blue", bold=True),
    Style(italic=True, underline=True),
    Style(color="yellow", link="https://example.com/x"),
)
ALPHABET = "abc [/] xyz 012 ‹›│█░ 日本 é"
CONSOLE = Console(color_system="truecolor", force_terminal=True, width=W)


def random_strip(rng: random.Random, width: int) -> Strip:
    segments: list[Segment] = []
    used = 0
    while used < width:
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 6)))
        strip = Strip([Segment(text, rng.choice(STYLES))]).crop(0, width - used)
        segments.extend(strip)
        used += strip.cell_length
    return Strip(segments).crop_extend(0, width, None)


def emulator() -> tuple[pyte.Screen, pyte.Stream]:
    screen = pyte.Screen(W, H)
    return screen, pyte.Stream(screen)


def cells(screen: pyte.Screen) -> list[list[tuple[str, str, str, bool, bool]]]:
    return [
        [
            (c.data, c.fg, c.bg, c.bold, c.italics)
            for c in (screen.buffer[y][x] for x in range(W))
        ]
        for y in range(H)
    ]


def chops_update(lines: dict[int, list[tuple[int, Strip]]]) -> ChopsUpdate:
    chops: list[dict[int, Strip | None]] = [{} for _ in range(H)]
    ends: list[list[int]] = [[] for _ in range(H)]
    spans = []
    for y, pieces in sorted(lines.items()):
        for x, strip in pieces:
            chops[y][x] = strip
            ends[y].append(x + strip.cell_length)
        spans.append((y, min(x for x, _ in pieces), max(x + s.cell_length for x, s in pieces)))
    return ChopsUpdate(chops, spans, ends)


def test_diffed_output_shows_the_same_screen_and_is_smaller() -> None:
    rng = random.Random(7)
    full_screen, full_stream = emulator()
    diff_screen, diff_stream = emulator()
    frames = FrameDiff()
    full_bytes = diff_bytes = 0
    rows = [random_strip(rng, W) for _ in range(H)]
    layout = LayoutUpdate([[row] for row in rows], Region(0, 0, W, H))
    for step in range(60):
        if step % 20 == 0:
            update = layout if step == 0 else LayoutUpdate([[r] for r in rows], Region(0, 0, W, H))
        else:
            changed: dict[int, list[tuple[int, Strip]]] = {}
            for y in rng.sample(range(H), rng.randint(1, 3)):
                x = rng.choice((0, 10, 20))
                strip = random_strip(rng, 20) if rng.random() < 0.3 else rows[y].crop(x, x + 20)
                if rng.random() < 0.5:  # a small change inside an otherwise equal chop
                    head = strip.crop(0, 5)
                    strip = Strip.join([head, random_strip(rng, 2), strip.crop(7, 20)])
                changed[y] = [(x, strip)]
                rows[y] = Strip.join([rows[y].crop(0, x), strip, rows[y].crop(x + 20, W)])
            update = chops_update(changed)
        full = update.render_segments(CONSOLE)
        diffed = frames.diff(update, W, ColorSystem.TRUECOLOR)
        diff = diffed.render_segments(CONSOLE) if diffed is not None else ""
        full_stream.feed(full)
        diff_stream.feed(diff)
        full_bytes += len(full.encode())
        diff_bytes += len(diff.encode())
        assert cells(diff_screen) == cells(full_screen), f"screens differ after step {step}"
    assert diff_bytes < full_bytes / 2, (diff_bytes, full_bytes)


def test_an_unchanged_frame_writes_nothing_and_reset_sends_it_again() -> None:
    frames = FrameDiff()
    rows = [Strip([Segment("hello", Style(bold=True))]).crop_extend(0, W, None)] * H
    layout = LayoutUpdate([[row] for row in rows], Region(0, 0, W, H))
    assert frames.diff(layout, W, ColorSystem.STANDARD) is not None
    assert frames.diff(layout, W, ColorSystem.STANDARD) is None
    frames.reset()
    again = frames.diff(layout, W, ColorSystem.STANDARD)
    assert again is not None and "hello" in again.render_segments(CONSOLE)
    assert frames.diff(layout, W + 1, ColorSystem.STANDARD) is not None  # resized: whole


def test_a_log_that_gains_lines_is_scrolled_not_redrawn() -> None:
    full_screen, full_stream = emulator()
    diff_screen, diff_stream = emulator()
    frames = FrameDiff()
    header = Strip([Segment("header line", Style(bold=True))]).crop_extend(0, W, None)

    def frame(first: int) -> LayoutUpdate:
        rows = [header] + [
            Strip([Segment(f"[TP{n % 8}] log line {n} 日本", Style(color="red") if n % 3 else None),
                   ]).crop_extend(0, W - 1, None).extend_cell_length(W, Style(bgcolor="blue"))
            for n in range(first, first + H - 2)
        ] + [header]
        return LayoutUpdate([[row] for row in rows], Region(0, 0, W, H))

    sizes = []
    for first in (0, 2, 3, 3, 7):
        update = frame(first)
        full_stream.feed(update.render_segments(CONSOLE))
        diffed = frames.diff(update, W, ColorSystem.TRUECOLOR)
        text = diffed.render_segments(CONSOLE) if diffed is not None else ""
        diff_stream.feed(text)
        sizes.append(len(text))
        assert cells(diff_screen) == cells(full_screen), f"screens differ at line {first}"
    assert frames.lines_scrolled > 0
    assert sizes[1] < sizes[0] / 2 and sizes[3] == 0

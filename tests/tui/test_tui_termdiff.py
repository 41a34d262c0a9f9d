"""Only changed cells are written, and the terminal ends up showing exactly what Textual's
own full output would show: both are replayed on a terminal emulator (pyte) and compared
cell by cell, styles included, over random frames with wide characters and links.

Frames are the sequences Textual writes (``Strip.render`` after a cursor move, a line feed
between lines, as its layout and partial updates do); ``TerminalDiff`` reads them as a
terminal would. ``test_tui_termdiff_live.py`` does the same with the running dashboard.
"""

from __future__ import annotations

import random

import pyte
import pytest
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual.drivers.headless_driver import HeadlessDriver
from textual.drivers.linux_driver import LinuxDriver
from textual.strip import Strip

from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.driver import diffing_driver
from eagle_tui.tui.options import DashboardOptions
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.termdiff import SYNC_END, SYNC_START, TerminalDiff

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


def cells(screen: pyte.Screen) -> list[list[tuple[object, ...]]]:
    return [
        [
            (c.data, c.fg, c.bg, c.bold, c.italics, c.underscore, c.reverse, c.strikethrough)
            for c in (screen.buffer[y][x] for x in range(W))
        ]
        for y in range(H)
    ]


def frames_of(width: int = W, height: int = H) -> TerminalDiff:
    return TerminalDiff(size=lambda: (width, height))


def layout_frame(rows: list[Strip]) -> str:
    """What Textual writes for a whole-screen update: each line after a cursor move."""
    return "\n".join(f"\x1b[{y + 1};1H{row.render(CONSOLE)}" for y, row in enumerate(rows))


def chops_frame(lines: dict[int, list[tuple[int, Strip]]]) -> str:
    """What Textual writes for a partial update: each changed piece after a cursor move."""
    return "\n".join(
        "".join(f"\x1b[{y + 1};{x + 1}H{strip.render(CONSOLE)}" for x, strip in pieces)
        for y, pieces in sorted(lines.items())
    )


def test_diffed_output_shows_the_same_screen_and_is_smaller() -> None:
    rng = random.Random(7)
    full_screen, full_stream = emulator()
    diff_screen, diff_stream = emulator()
    frames = frames_of()
    full_bytes = diff_bytes = 0
    rows = [random_strip(rng, W) for _ in range(H)]
    for step in range(60):
        if step % 20 == 0:
            full = layout_frame(rows)
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
            full = chops_frame(changed)
        diff = frames.feed(full)
        full_stream.feed(full)
        diff_stream.feed(diff)
        full_bytes += len(full.encode())
        diff_bytes += len(diff.encode())
        assert cells(diff_screen) == cells(full_screen), f"screens differ after step {step}"
    assert diff_bytes < full_bytes / 2, (diff_bytes, full_bytes)


def test_an_unchanged_frame_writes_nothing_and_reset_sends_it_again() -> None:
    width = W
    frames = TerminalDiff(size=lambda: (width, H))
    rows = [Strip([Segment("hello", Style(bold=True))]).crop_extend(0, W, None)] * H
    layout = layout_frame(rows)
    assert frames.feed(layout) != ""
    assert frames.feed(layout) == ""
    frames.reset()
    again = frames.feed(layout)
    assert again != "" and "hello" in again
    width = W + 1
    assert frames.feed(layout) != ""  # resized: whole


def test_a_log_that_gains_lines_is_scrolled_not_redrawn() -> None:
    full_screen, full_stream = emulator()
    diff_screen, diff_stream = emulator()
    frames = frames_of()
    header = Strip([Segment("header line", Style(bold=True))]).crop_extend(0, W, None)

    def frame(first: int) -> str:
        rows = [header] + [
            Strip([Segment(f"[TP{n % 8}] log line {n} 日本", Style(color="red") if n % 3 else None),
                   ]).crop_extend(0, W - 1, None).extend_cell_length(W, Style(bgcolor="blue"))
            for n in range(first, first + H - 2)
        ] + [header]
        return layout_frame(rows)

    sizes = []
    for first in (0, 2, 3, 3, 7):
        update = frame(first)
        full_stream.feed(update)
        text = frames.feed(update)
        diff_stream.feed(text)
        sizes.append(len(text))
        assert cells(diff_screen) == cells(full_screen), f"screens differ at line {first}"
    assert frames.lines_scrolled > 0
    assert sizes[1] < sizes[0] / 2 and sizes[3] == 0


def replay_both(writes: list[str]) -> tuple[list[str], pyte.Screen, pyte.Screen]:
    """Each write as Textual sent it and as ``TerminalDiff`` passes it on, replayed on two
    emulators; the screens must agree after every write."""
    full_screen, full_stream = emulator()
    diff_screen, diff_stream = emulator()
    frames = frames_of()
    outs = []
    for step, write in enumerate(writes):
        full_stream.feed(write)
        out = frames.feed(write)
        diff_stream.feed(out)
        outs.append(out)
        assert cells(diff_screen) == cells(full_screen), f"screens differ after write {step}"
    return outs, full_screen, diff_screen


def some_rows(seed: int) -> list[Strip]:
    rng = random.Random(seed)
    return [random_strip(rng, W) for _ in range(H)]


def test_what_it_does_not_know_is_passed_on_in_order_and_the_frame_sent_whole() -> None:
    rows = some_rows(1)
    frame = layout_frame(rows)
    erase = "\x1b[3;5H\x1b[44m\x1b[K"  # erase to the end of the line, in the stream's colours
    outs, _, _ = replay_both([frame, frame, erase, frame, "\x1b[2J", frame])
    assert outs[1] == ""
    assert outs[2].endswith("\x1b[44m\x1b[K") or outs[2].endswith("\x1b[K")
    assert "\x1b[3;5H" in outs[2]  # the cursor put back where the stream had it first
    assert len(outs[3]) > len(frame) / 2  # the shadow was forgotten: sent whole again
    assert outs[4].endswith("\x1b[2J") and len(outs[5]) > len(frame) / 2


def test_mode_switches_pass_without_forgetting_the_screen() -> None:
    frame = layout_frame(some_rows(2))
    modes = "\x1b[?25l\x1b[?1000h\x1b[?1006h\x1b[?2004h\x1b]52;c;aGk=\x07\x1b[>1u\x07"
    outs, _, _ = replay_both([frame, modes, frame])
    assert outs[1] == modes and outs[2] == ""


def test_synchronized_updates_are_kept_and_an_empty_one_is_not_sent() -> None:
    rows = some_rows(3)
    frame = layout_frame(rows)
    changed = chops_frame({2: [(4, Strip([Segment("XYZ", Style(color="red"))]))]})
    outs, _, _ = replay_both([SYNC_START, frame, SYNC_END, SYNC_START, frame, SYNC_END,
                              SYNC_START, changed, SYNC_END])
    assert outs[0] == "" and outs[1].startswith(SYNC_START) and outs[2] == SYNC_END
    assert outs[3:6] == ["", "", ""]
    assert outs[7].startswith(SYNC_START) and "XYZ" in outs[7] and outs[8] == SYNC_END


def test_the_cursor_is_left_where_the_stream_put_it_once() -> None:
    frame = layout_frame(some_rows(4))
    outs, full, diff = replay_both([frame + "\x1b[5;7H", frame + "\x1b[5;7H", frame + "\x1b[2;3H"])
    assert outs[0].endswith("\x1b[5;7H") and outs[1] == "" and outs[2] == "\x1b[2;3H"
    assert (diff.cursor.x, diff.cursor.y) == (full.cursor.x, full.cursor.y) == (2, 1)


def test_a_sequence_cut_between_two_writes_is_read_whole() -> None:
    frame = layout_frame(some_rows(5))
    outs, _, _ = replay_both([frame[:7], frame[7:300], frame[300:]])  # cuts a CUP and an SGR
    assert "".join(outs)
    assert replay_both([frame, frame[:123], frame[123:]])[0][1:] == ["", ""]


def test_colours_restored_by_the_terminal_are_followed_until_reset() -> None:
    """After a restore (ESC 8) the stream's colours are unknown: its text passes as it is,
    and cells are diffed again from its next reset."""
    rows = some_rows(6)
    frame = layout_frame(rows)
    restored = "\x1b[1;31m\x1b7\x1b[0m\x1b[2;2H\x1b8plain?\x1b[0m\x1b[3;3Hafter"
    outs, _, _ = replay_both([frame, restored, frame, frame])
    assert "\x1b8plain?" in outs[1]
    assert outs[3] == ""


def test_the_dashboard_runs_on_textuals_linux_driver_writing_through_the_diff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    written: list[str] = []
    monkeypatch.setattr(LinuxDriver, "write", lambda self, data: written.append(data))
    frames = TerminalDiff(size=lambda: (10, 2))
    driver_class = diffing_driver(LinuxDriver, frames)
    assert driver_class is not None and issubclass(driver_class, LinuxDriver)
    driver = driver_class.__new__(driver_class)  # no terminal here: only write is used
    driver.write("\x1b[1;1Hab")
    driver.write("\x1b[1;1Hab")
    driver.write("\x1b[1;1Hac")
    assert written == ["\x1b[1;1H\x1b[0mab\x1b[0m", "\x1b[1;2H\x1b[0mc\x1b[0m"]
    # any other driver (Windows, TEXTUAL_DRIVER, headless tests): Textual's own output
    assert diffing_driver(HeadlessDriver, frames) is None
    app = EagleApp(DashboardOptions(), sources=Sources())
    assert issubclass(app.driver_class, LinuxDriver) and app.driver_class is not LinuxDriver

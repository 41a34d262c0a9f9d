"""The running dashboard, on a real pseudo-terminal: every write Textual makes and what
``TerminalDiff`` sends instead are recorded, then replayed on two terminal emulators (pyte),
which must show the same screen after every write: views switched, help opened, a log
that grows, clocks that tick, the screen resized. What reaches the terminal is also much
less than what Textual wrote.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
from pathlib import Path

import pyte
import pytest
from support.waiting import wait_until

pytestmark = pytest.mark.slow

COLS, ROWS = 120, 40
ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")

CHILD = """
import json, sys
from eagle_tui.tui import dashboard
from eagle_tui.tui.termdiff import TerminalDiff

record = open(sys.argv[1], "w", encoding="utf-8")
feed = TerminalDiff.feed

def recorded(self, data):
    out = feed(self, data)
    record.write(json.dumps([data, out, list(self._size())]) + "\\n")
    record.flush()
    return out

TerminalDiff.feed = recorded
sys.exit(dashboard.main(sys.argv[2:]))
"""


class Dashboard:
    """The dashboard on a pseudo-terminal; ``output`` is everything it wrote."""

    def __init__(self, args: list[str], record: Path, env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the dashboard on the pty
            # COLUMNS and LINES would win over the terminal's size (readline, loaded by
            # pytest, puts them in the process's environment; xdist's workers inherit them).
            child_env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
            os.execve(sys.executable, [sys.executable, "-c", CHILD, str(record), *args],
                      {**child_env, **env})
        self.resize(COLS, ROWS)
        self.output = b""

    def resize(self, cols: int, rows: int) -> None:
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.kill(self.pid, signal.SIGWINCH)

    def read(self) -> bool:
        """Read what is there; False once the dashboard closed its terminal."""
        while select.select([self.fd], [], [], 0)[0]:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except OSError:  # EIO: the child closed the terminal
                return False
            if not chunk:
                return False
            self.output += chunk
        return True

    def shows(self, text: str) -> bool:
        self.read()
        return text.encode() in self.output

    def press(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def stop(self) -> int | None:
        """Press q; the exit status (None when it had to be killed)."""
        self.press("q")
        exited = [False]

        def gone() -> bool:
            exited[0] = os.waitpid(self.pid, os.WNOHANG)[0] != 0
            self.read()
            return exited[0]

        try:
            wait_until(gone, 120, what="the dashboard to quit on q")
        finally:
            if not exited[0]:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            os.close(self.fd)
        return 0


def screens_after_each_write(record: Path) -> tuple[int, int, int]:
    """Replay Textual's writes and the diffed ones; assert equal screens after each write.
    (writes, bytes Textual wrote, bytes sent)."""
    full = pyte.Screen(COLS, ROWS)
    diff = pyte.Screen(COLS, ROWS)
    full_stream, diff_stream = pyte.Stream(full), pyte.Stream(diff)
    wrote = sent = 0
    lines = record.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):
        data, out, (cols, rows) = json.loads(line)
        for screen in (full, diff):
            if (screen.columns, screen.lines) != (cols, rows):
                screen.resize(rows, cols)
        full_stream.feed(data)
        diff_stream.feed(out)
        wrote, sent = wrote + len(data.encode()), sent + len(out.encode())
        assert diff.display == full.display, f"text differs after write {number}: {data[:200]!r}"
        assert styles(diff) == styles(full), f"styles differ after write {number}"
    return len(lines), wrote, sent


def styles(screen: pyte.Screen) -> list[list[tuple[object, ...]]]:
    return [
        [(c.fg, c.bg, c.bold, c.italics, c.underscore, c.reverse)
         for c in (screen.buffer[y][x] for x in range(screen.columns))]
        for y in range(screen.lines)
    ]


def test_the_dashboard_shows_the_same_screen_as_textual_with_fewer_bytes(
    tmp_path: Path,
) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(f"INFO line {n} of the log, 日本 and ‹wide›\n" for n in range(30)))
    record = tmp_path / "writes.jsonl"
    env = {"TERM": "xterm-256color", "EAGLE_TUI_STATE_DIR": str(tmp_path / "state"),
           "EAGLE_TUI_CONFIG_DIR": str(tmp_path / "config"), "LANG": "C.UTF-8"}
    dashboard = Dashboard(["--url", "http://127.0.0.1:9", "--log", str(log), "--refresh", "0.2"],
                          record, env)
    try:
        painted = Painted(record, dashboard)
        wait_until(lambda: painted.since(0, "line 29 of the log"), 120, what="the log pane")
        for n in range(30, 45):  # the log grows: its pane scrolls
            seen = painted.count()
            with log.open("a") as f:
                f.write(f"INFO line {n} of the log\n")
            wait_until(lambda n=n, s=seen: painted.since(s, f"line {n} of the log"), 30,
                       what=f"line {n}")
        # (not the Inspect view: with no shards its path field takes the keys)
        for key, marker in (("2", "no batches yet"), ("3", "no batch is being watched"),
                            ("1", "line 44 of the log"), ("?", "help"),
                            ("?", "line 44 of the log")):
            seen = painted.count()
            dashboard.press(key)
            wait_until(lambda m=marker, s=seen: painted.since(s, m), 120,
                       what=f"{marker!r} after {key}")
        dashboard.resize(100, 30)
        wait_until(lambda: painted.since(0, "", size=(100, 30)), 120, what="a frame at 100x30")
    finally:
        dashboard.stop()
    writes, wrote, sent = screens_after_each_write(record)
    assert writes > 20
    assert sent < wrote / 2, (sent, wrote)


class Painted:
    """What Textual wrote, as recorded by the dashboard (the terminal gets only changes)."""

    def __init__(self, record: Path, dashboard: Dashboard) -> None:
        self.record = record
        self.dashboard = dashboard

    def writes(self) -> list[tuple[str, str, list[int]]]:
        self.dashboard.read()  # keep the terminal drained
        if not self.record.exists():
            return []
        lines = self.record.read_text(encoding="utf-8").splitlines()
        return [tuple(json.loads(line)) for line in lines if line.endswith("]")]

    def count(self) -> int:
        return len(self.writes())

    def since(self, start: int, text: str, size: tuple[int, int] | None = None) -> bool:
        """Textual painted ``text`` (at ``size``) after write number ``start``."""
        return any(text in plain(data) and (size is None or tuple(at) == size) and out
                   for data, out, at in self.writes()[start:])


def plain(data: str) -> str:
    """The text of terminal output (a styled run may start inside a phrase)."""
    return ESCAPES.sub("", data)

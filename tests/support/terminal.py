"""A real terminal for the dashboard: ``eagle-tui`` on a pseudo-terminal, read as a screen.

``PtyTerminal`` starts the installed ``eagle-tui`` console script (the one beside the test's
Python: what a user runs) on a pty of ``cols`` x ``rows``. A reader thread feeds everything
it writes to a ``pyte`` screen (a VT100/xterm emulator) and keeps the raw bytes (the
clipboard travels as OSC 52). Tests write the bytes a terminal sends, not key names:

- ``press(*keys)``: one write per key (``KEYS`` has the sequences of the keys by Textual's names;
  a letter or digit is itself);
- ``burst(*keys)``: every key in ONE write, as a laggy SSH link or a fast typist delivers
  them (the app reads them in one go);
- ``paste(text)``: bracketed paste (``ESC [200~ … ESC [201~``);
- ``click(x, y)`` / ``click_text(text)``: an SGR mouse press and release (``ESC [<0;X;YM``
  and ``…m``, 1-based), at a cell or at the first cell of some text on screen.

Reading: ``text()``/``lines()`` (what the screen shows now), ``find(text)``, and
``wait_for(text)`` / ``wait_until(condition)``, which poll the screen until it shows what
is expected (generous timeouts: the machine may be loaded), never a blind sleep.
"""

from __future__ import annotations

import base64
import fcntl
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pyte

from support.waiting import wait_exit, wait_until

KEYS: dict[str, bytes] = {
    "enter": b"\r",
    "tab": b"\t",
    "shift+tab": b"\x1b[Z",
    "escape": b"\x1b",
    "backspace": b"\x7f",
    "space": b" ",
    "up": b"\x1b[A",
    "down": b"\x1b[B",
    "right": b"\x1b[C",
    "left": b"\x1b[D",
    "home": b"\x1b[H",
    "end": b"\x1b[F",
    "f1": b"\x1bOP",
    "ctrl+g": b"\x07",
    "ctrl+l": b"\x0c",
    "ctrl+p": b"\x10",
    "ctrl+s": b"\x13",
    "ctrl+u": b"\x15",
    # printable keys Textual names by word (what a binding or a pilot press says)
    "slash": b"/",
    "question_mark": b"?",
    "left_square_bracket": b"[",
    "right_square_bracket": b"]",
}
"""What an xterm sends for each named key, by Textual's name (a letter or digit is sent as
itself; other characters by their name, as bindings spell them)."""

PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"
OSC52 = re.compile(rb"\x1b\]52;[a-z]*;([A-Za-z0-9+/=]*)(?:\x07|\x1b\\)")
TIMEOUT_S = 90.0
"""Default wait: a loaded 2-core machine starts the dashboard in seconds, not minutes."""


def key_bytes(key: str) -> bytes:
    """The bytes a terminal sends for ``key`` (a name in ``KEYS``, or a letter or digit)."""
    if key in KEYS:
        return KEYS[key]
    if len(key) == 1 and key.isalnum():
        return key.encode()
    raise ValueError(f"no terminal sequence known for key {key!r}")


def eagle_tui_command() -> str:
    """The ``eagle-tui`` console script of this environment."""
    script = Path(sys.executable).with_name("eagle-tui")
    assert script.exists(), f"{script} missing: install the project (pip install -e .)"
    return str(script)


class PtyTerminal:
    """``eagle-tui ARGS`` on a pseudo-terminal, with a screen that shows what it drew."""

    def __init__(self, args: Sequence[str], *, cols: int = 120, rows: int = 40,
                 cwd: Path | None = None, env: dict[str, str] | None = None,
                 program: str | None = None) -> None:
        """``program`` (default: ``eagle-tui``) runs with ``args``; a shell there runs
        the pipelines a person types (``program="/bin/bash", args=["-c", "… | head"]``)."""
        self.screen = pyte.Screen(cols, rows)
        self._stream = pyte.ByteStream(self.screen)
        self._lock = threading.Lock()
        self.raw = bytearray()
        command = program or eagle_tui_command()
        child_env = {key: value for key, value in os.environ.items()
                     if key not in ("COLUMNS", "LINES") and not key.startswith("TEXTUAL")}
        child_env.update({"TERM": "xterm-256color", "LANG": "C.UTF-8", **(env or {})})
        size = struct.pack("HHHH", rows, cols, 0, 0)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the dashboard on the pty
            try:
                # The size before the dashboard starts: set from the parent it could come
                # after the dashboard read it (a pty starts at 0x0: Textual falls back to 80x24).
                fcntl.ioctl(0, termios.TIOCSWINSZ, size)
                if cwd is not None:
                    os.chdir(cwd)
                os.execve(command, [command, *args], child_env)
            finally:
                os._exit(127)
        self.exit_status: int | None = None
        self._reader = threading.Thread(target=self._read, name="pty-reader", daemon=True)
        self._reader.start()

    # -- output ------------------------------------------------------------------------------

    def _read(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.5)
                if not ready:
                    if self.exit_status is not None:
                        return
                    continue
                chunk = os.read(self.fd, 1 << 16)
            except (OSError, ValueError):  # EIO: the dashboard closed the terminal
                return
            if not chunk:
                return
            with self._lock:
                self.raw += chunk
                self._stream.feed(chunk)

    def lines(self) -> list[str]:
        """The screen's rows as text."""
        with self._lock:
            return list(self.screen.display)

    def text(self) -> str:
        """The whole screen as text, one row per line."""
        return "\n".join(self.lines())

    def find(self, text: str) -> tuple[int, int] | None:
        """The cell (x, y) where ``text`` starts on screen (the first row that shows it)."""
        with self._lock:
            for y in range(self.screen.lines):
                row = self.screen.buffer[y]
                cells = "".join((row[x].data or " ")[:1] for x in range(self.screen.columns))
                x = cells.find(text)
                if x >= 0:
                    return x, y
        return None

    def clipboard(self) -> list[str]:
        """Every text the dashboard sent to the terminal's clipboard (OSC 52), in order."""
        with self._lock:
            data = bytes(self.raw)
        return [base64.b64decode(m.group(1)).decode("utf-8") for m in OSC52.finditer(data)]

    def alive(self) -> str | None:
        """An ``unless`` for waits: why waiting is pointless (the dashboard exited)."""
        if self.exit_status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.exit_status = os.waitstatus_to_exitcode(status)
        if self.exit_status is None:
            return None
        return f"the dashboard exited ({self.exit_status}); screen:\n{self.text()}"

    def wait_until(self, condition: Callable[[], bool], what: str,
                   timeout: float = TIMEOUT_S) -> None:
        """Until ``condition()`` holds; a timeout fails naming ``what`` and the screen."""
        wait_until(condition, timeout, lambda: f"{what}; the screen:\n{self.text()}",
                   every=0.05, unless=self.alive)

    def wait_for(self, text: str, timeout: float = TIMEOUT_S) -> None:
        """Until the screen shows ``text``."""
        self.wait_until(lambda: text in self.text(), f"{text!r} on screen", timeout)

    def wait_gone(self, text: str, timeout: float = TIMEOUT_S) -> None:
        """Until the screen no longer shows ``text``."""
        self.wait_until(lambda: text not in self.text(), f"{text!r} gone", timeout)

    # -- input -------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Send ``data`` to the dashboard in one write."""
        os.write(self.fd, data)

    def press(self, *keys: str) -> None:
        """Each key in its own write."""
        for key in keys:
            self.write(key_bytes(key))

    def burst(self, *keys: str) -> None:
        """Every key in one write (a word is its characters)."""
        self.write(b"".join(key_bytes(k) if k in KEYS or len(k) == 1 else k.encode()
                            for k in keys))  # a word (several characters) is typed as is

    def paste(self, text: str) -> None:
        """``text`` as a bracketed paste."""
        self.write(PASTE_START + text.encode() + PASTE_END)

    def click(self, x: int, y: int) -> None:
        """A left click on cell (x, y), 0-based (SGR mouse: 1-based on the wire)."""
        at = f"{x + 1};{y + 1}".encode()
        self.write(b"\x1b[<0;" + at + b"M" + b"\x1b[<0;" + at + b"m")

    def wheel(self, x: int, y: int, *, down: bool = True) -> None:
        """One notch of the mouse wheel over cell (x, y) (SGR buttons 65 down, 64 up)."""
        button = b"65" if down else b"64"
        self.write(b"\x1b[<" + button + f";{x + 1};{y + 1}".encode() + b"M")

    def click_text(self, text: str) -> None:
        """Click the first cell of ``text`` where the screen shows it."""
        self.wait_for(text)
        where = self.find(text)
        assert where is not None, f"{text!r} not on screen:\n{self.text()}"
        self.click(*where)

    # -- end -----------------------------------------------------------------------------------

    def close(self) -> None:
        """End the dashboard (SIGTERM, then SIGKILL) and release the terminal."""
        if self.alive() is None:
            os.kill(self.pid, signal.SIGTERM)
            if not wait_exit(self.pid, 15.0):
                os.kill(self.pid, signal.SIGKILL)
            _, status = os.waitpid(self.pid, 0)
            self.exit_status = os.waitstatus_to_exitcode(status)
        self._reader.join(timeout=5)
        os.close(self.fd)

    def __enter__(self) -> PtyTerminal:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

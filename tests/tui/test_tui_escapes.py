"""Escape sequences fed through a server log, a sample id and a batch name never reach the
terminal (issue 12): what the terminal receives holds none of them, only their visible form
(``␛]0;…``), and the dashboard still quits on ``q``.

Before the fix the tester saw the pane title change, 19 clipboard writes (OSC 52) and ``q``
stop working in 5 of 6 runs. The dashboard runs here in a real pseudo-terminal, exactly as a
user's terminal would drive it, and every byte it writes is kept and searched.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from support.records import stored_config
from tui_shards import make_row, write_shards

from eagle_tui.core import kimi
from eagle_tui.core.batches.registry import BatchRecord, Registry
from eagle_tui.core.text import terminal_safe
from eagle_tui.tui.render import literal

TITLE = "\x1b]0;PWNED-TITLE\x07"
CLIPBOARD = "\x1b]52;c;cHduZWQ=\x07"
KEYPAD = "\x1b[?1l\x1b>\x1b[?1000l"  # cursor keys, keypad and mouse modes: "q stops working"
CSI_8BIT = "\x9b2J"
HOSTILE = (TITLE, CLIPBOARD, KEYPAD, CSI_8BIT)
RAW = [seq.encode() for seq in HOSTILE]
SHOWN = ["␛]0;PWNED-TITLE".encode(), "␛]52;c;".encode()]


def test_terminal_safe_shows_every_control_character() -> None:
    for seq in HOSTILE:
        shown = terminal_safe(f"a{seq}b")
        assert shown.isprintable() and "\x1b" not in shown and "\x9b" not in shown
    assert terminal_safe(TITLE) == "␛]0;PWNED-TITLE␇"
    assert terminal_safe("x\ry\u202ez\udc80") == "x␍y<U+202E>z\\udc80"
    assert terminal_safe("line\nnext", multiline=True) == "line\nnext"
    assert terminal_safe("plain 東京 🚀\ttab") == "plain 東京 🚀\ttab"


def test_rich_and_textual_text_made_by_literal_shows_escapes() -> None:
    """The constructors every widget builds outside text with (``tui.render.literal``)."""
    makers: tuple[Callable[[str], str], ...] = (
        lambda s: literal.rich_text(s).plain, lambda s: literal.content(s).plain)
    for make in makers:
        text = make(f"a{TITLE}{CLIPBOARD}b\x9bc")
        assert "\x1b" not in text and "\x9b" not in text and "␛]0;PWNED-TITLE" in text
        assert make("keep\nnewlines\tand tabs") == "keep\nnewlines\tand tabs"


def _run_in_pty(args: list[str], *, quit_after: bytes, env: dict[str, str],
                timeout: float = 60.0) -> tuple[bytes, bool]:
    """Run ``args`` on a 160x50 pseudo-terminal; once ``quit_after`` was shown press ``q``.
    (everything written to the terminal, whether it exited after the ``q``)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the dashboard, on the pty
        os.environ.update(env)
        os.execv(sys.executable, [sys.executable, "-m", "eagle_tui.tui.cli", *args])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
    out, pressed_at, exited = b"", None, False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            readable, _, _ = select.select([fd], [], [], 0.1)
            if readable:
                try:
                    chunk = os.read(fd, 1 << 16)
                except OSError:  # EIO: the child closed the terminal (it exited)
                    chunk = b""
                out += chunk
                if not chunk:
                    break
            if pressed_at is None and quit_after in out:
                time.sleep(0.5)  # let it settle, as a user would
                os.write(fd, b"q")
                pressed_at = time.monotonic()
            if pressed_at is not None and time.monotonic() - pressed_at > 20:
                break
        done, _ = os.waitpid(pid, os.WNOHANG)
        if not done:
            time.sleep(1)
            done, _ = os.waitpid(pid, os.WNOHANG)
        exited = bool(done) and pressed_at is not None
    finally:
        if not exited:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)
    return out, exited


@pytest.mark.slow
def test_escapes_in_a_server_log_reach_the_dashboard_only_visibly(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(f"INFO line {i}: {seq} after\n" for i, seq in enumerate(HOSTILE))
                   + f"partial progress {TITLE}")  # the unterminated last line too
    # The marker is not the last line, so it shows only in the log pane (the card quotes the
    # last line at once; the pane is redrawn once per refresh period).
    log.write_text(log.read_text() + "\nINFO end marker ZZTOP\nINFO the last line\n")
    out, exited = _run_in_pty(
        ["--url", "http://127.0.0.1:9", "--log", str(log), "--theme", "ansi-dark"],
        quit_after=b"ZZTOP", env={"TERM": "xterm-256color",
                                  "EAGLE_TUI_STATE_DIR": str(tmp_path / "state")})
    assert b"ZZTOP" in out, out[-2000:]
    for raw in RAW:
        assert raw not in out, raw
    assert b"PWNED-TITLE\x07" not in out and b"\x1b]52;" not in out
    for shown in SHOWN:
        assert shown in out
    assert exited, "q did not quit the dashboard"


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", *args],
                          capture_output=True, env={**os.environ, **env}, timeout=120)


def _clean(output: bytes) -> None:
    for raw in RAW:
        assert raw not in output, raw
    text = output.decode("utf-8")  # (0x9b is also a byte of "␛" in UTF-8: look at chars)
    assert "\x1b]" not in text and "\x9b" not in text
    assert "␛]0;PWNED-TITLE" in text


def test_inspect_prints_a_hostile_sample_id_visibly(tmp_path: Path) -> None:
    prompt = [kimi.IM_USER, 100, kimi.IM_END, kimi.IM_ASSISTANT, kimi.THINK]
    row = make_row(0, prompt, [300, kimi.THINK_END, 400, kimi.IM_END])
    row = replace(row, sample_id=f"id-{TITLE}{CLIPBOARD}{KEYPAD}{CSI_8BIT}",
                  finish_reason=f"stop{TITLE}")
    write_shards(tmp_path / "batch", [row])
    result = _cli("inspect", str(tmp_path / "batch" / "shards"), "--raw-ids", env={})
    assert result.returncode == 0, result.stderr
    _clean(result.stdout)
    stats = _cli("stats", str(tmp_path / "batch" / "shards"), env={})
    assert stats.returncode == 0 and b"\x1b]" not in stats.stdout


def test_batches_prints_a_hostile_batch_name_visibly(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {"EAGLE_TUI_STATE_DIR": str(state)}
    out_dir = tmp_path / "out"
    name = f"night{TITLE}{CLIPBOARD}{KEYPAD}{CSI_8BIT}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EAGLE_TUI_STATE_DIR", str(state))
        Registry().save(BatchRecord(
            id="20250101-000000-aaaa", name=name, out_dir=str(out_dir),
            socket=str(out_dir / "control.sock"), log=str(out_dir / "worker.log"),
            config=stored_config(out_dir),
            created_at=time.time(), final_state="failed", reason=f"server said {TITLE}"))
    listing = _cli("batches", env=env)
    assert listing.returncode == 0, listing.stderr
    _clean(listing.stdout)
    details = _cli("batches", "20250101-000000-aaaa", env=env)
    assert details.returncode == 0
    _clean(details.stdout)
    refused = _cli("pause", "20250101-000000-aaaa", env=env)  # the error names the batch
    assert refused.returncode == 5
    _clean(refused.stderr)

"""Waiting for something another process or task does: poll a condition, never sleep blind.

Every helper returns as soon as the condition holds and fails with ``what`` named when the
timeout passes, so a slow machine makes a test slower, never wrong.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

POLL_S = 0.01


def poll_until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Check ``condition`` every 10 ms until it holds (True) or ``timeout`` passes (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def wait_until(condition: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    """Like :func:`poll_until`, but a timeout fails the test, naming ``what`` it waited for."""
    assert poll_until(condition, timeout), f"timed out after {timeout:g}s waiting for {what}"


async def async_wait_until(condition: Callable[[], bool], timeout: float = 30.0,
                           what: str = "") -> None:
    """:func:`wait_until` for async tests: yields to the event loop between looks."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout:g}s waiting for {what}"
        await asyncio.sleep(POLL_S)


def wait_for_path(path: Path, timeout: float = 60.0) -> None:
    """Until ``path`` exists."""
    wait_until(path.exists, timeout, what=str(path))


def log_contains(path: Path, text: str) -> Callable[[], bool]:
    """A condition: ``text`` occurs in the file at ``path``."""
    return lambda: path.exists() and text in path.read_text(errors="replace")

"""Waiting for something another process, thread or task does: look at a condition until it
holds, never sleep blind. The suite's one set of wait helpers.

Every helper returns as soon as the condition holds and fails with ``what`` named when the
timeout passes, so a slow machine makes a test slower, never wrong. ``unless`` says why
waiting longer is pointless (the process that should do it has exited): the wait then fails
at once with that reason instead of running into its timeout.

- :func:`wait_until` / :func:`poll_until`: from a test's own thread;
- :func:`async_wait_until`: from a coroutine (the condition may be async too); ``pause``
  replaces ``asyncio.sleep`` between looks, e.g. a Textual pilot's ``pause`` so the app runs;
- :func:`pilot_wait`: the dashboard tests' form of it;
- :func:`wait_exit`, :func:`wait_lock_free`: events, not polls (a pidfd, a blocking flock).
"""

from __future__ import annotations

import asyncio
import fcntl
import inspect
import os
import select
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

POLL_S = 0.01
PILOT_POLL_S = 0.02
"""Between looks at a Textual app: each pause lets it process messages and repaint."""

Unless = Callable[[], str | None]
"""Why waiting is pointless now (e.g. "the capture exited"), or None to keep waiting."""
What = str | Callable[[], str]
"""What is waited for; a callable is asked at the failure (to say where things stood)."""


def _name(what: What) -> str:
    return what() if callable(what) else what


def _give_up(unless: Unless | None, what: What) -> None:
    reason = unless() if unless is not None else None
    assert reason is None, f"gave up waiting for {_name(what)}: {reason}"


def _timed_out(timeout: float, what: What) -> str:
    return f"timed out after {timeout:g}s waiting for {_name(what)}"


def poll_until(condition: Callable[[], bool], timeout: float = 10.0, *,
               every: float = POLL_S, unless: Unless | None = None) -> bool:
    """Check ``condition`` every ``every`` seconds until it holds (True) or ``timeout``
    passes (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        _give_up(unless, "a condition")
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)
    return True


def wait_until(condition: Callable[[], bool], timeout: float = 30.0, what: What = "", *,
               every: float = POLL_S, unless: Unless | None = None) -> None:
    """Like :func:`poll_until`, but a timeout fails the test, naming ``what`` it waited for."""
    deadline = time.monotonic() + timeout
    while not condition():
        _give_up(unless, what)
        assert time.monotonic() < deadline, _timed_out(timeout, what)
        time.sleep(every)


async def async_wait_until(condition: Callable[[], bool | Awaitable[bool]],
                           timeout: float = 30.0, what: What = "", *, every: float = POLL_S,
                           pause: Callable[[float], Awaitable[Any]] | None = None,
                           unless: Unless | None = None) -> None:
    """:func:`wait_until` for async tests: yields to the event loop between looks (through
    ``pause`` when given); ``condition`` may be a coroutine function (an HTTP probe)."""
    deadline = time.monotonic() + timeout
    sleep = pause or asyncio.sleep
    while True:
        holds = condition()
        if inspect.isawaitable(holds):
            holds = await holds
        if holds:
            return
        _give_up(unless, what)
        assert time.monotonic() < deadline, _timed_out(timeout, what)
        await sleep(every)


async def pilot_wait(pilot: Any, condition: Callable[[], bool], timeout: float = 30.0,
                     what: What = "condition") -> None:
    """Pump a Textual app (``pilot.pause``) until ``condition()`` holds."""
    await async_wait_until(condition, timeout, what, every=PILOT_POLL_S, pause=pilot.pause)


def wait_for_path(path: Path, timeout: float = 60.0, *, unless: Unless | None = None) -> None:
    """Until ``path`` exists."""
    wait_until(path.exists, timeout, what=str(path), every=0.02, unless=unless)


def log_contains(path: Path, text: str) -> Callable[[], bool]:
    """A condition: ``text`` occurs in the file at ``path``."""
    return lambda: path.exists() and text in path.read_text(errors="replace")


def exited(process: subprocess.Popen[Any], what: str = "the process") -> Unless:
    """An ``unless``: ``process`` has exited (with its code)."""
    return lambda: None if process.poll() is None else f"{what} exited ({process.returncode})"


def wait_exit(pid: int, timeout: float = 10.0) -> bool:
    """Block until ``pid`` terminates (its pidfd becomes readable), or the timeout passes."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
        return bool(readable)
    finally:
        os.close(fd)


def wait_lock_free(path: Path, timeout: float = 30.0) -> bool:
    """Block until no process holds an flock on ``path``; False on timeout.

    A blocking flock returns the moment the holder dies: an event, not a poll.
    """
    if not path.exists():
        return True
    fd = os.open(path, os.O_RDONLY)
    done = threading.Event()

    def take() -> None:
        fcntl.flock(fd, fcntl.LOCK_SH)
        fcntl.flock(fd, fcntl.LOCK_UN)
        done.set()

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    freed = done.wait(timeout)
    if freed:
        os.close(fd)  # else the daemon thread still blocks on it; leak the fd rather than race
    return freed

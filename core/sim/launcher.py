"""Run the simulated server as a separate process (tests, demos, benchmarks).

``SimProcess`` starts ``python -m eagle_tui.core.sim`` on a free loopback port (again on
another when a process took that port before the sim bound it), sends its
output (stdout and stderr, bars included) to a log file, and offers waits on
that output instead of sleeps::

    with SimProcess(["--time-scale", "0", "--tokens-per-s", "0"]) as sim:
        sim.wait_ready(timeout=30)
        httpx.post(sim.url + "/generate", json={...})

It is also an async context manager, with ``*_async`` waits, for async tests.
The process is always killed on exit from the ``with`` block, at interpreter
exit, and when the object is garbage collected.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Final, Self

READY_LINE: Final = r"The server is fired up and ready to roll!"
BOUND_LINE: Final = r"Uvicorn running on "
_POLL: Final = 0.02  # seconds between looks at the log file


class SimExited(RuntimeError):
    """The sim process ended while something was waiting for it."""


REBINDS: Final = 3
"""How often a sim that lost its chosen port is started again on a new one."""
_BIND_FAILED: Final = re.compile(r"\[Errno 98\] error while attempting to bind")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


class SimProcess:
    """One ``python -m eagle_tui.core.sim`` process and its log."""

    def __init__(self, args: Sequence[str] = (), *, port: int | None = None,
                 host: str = "127.0.0.1", log_path: Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.host = host
        self._given_args = list(args)
        faulty = any(arg.startswith("--fatal") for arg in args)  # its bind error is wanted
        self._rebinds_left = REBINDS if port is None and not faulty else 0
        self.port = port if port is not None else free_port(host)
        self.args = [*args, "--host", host, "--port", str(self.port)]
        self._own_log = log_path is None
        self.log_path = log_path or Path(tempfile.mkstemp(prefix="sim-", suffix=".log")[1])
        self._env = env
        self._process: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[[subprocess.Popen[bytes]], SimProcess] | None = None

    # ---- lifecycle ----------------------------------------------------------------

    def start(self) -> Self:
        """Start the process (once)."""
        if self._process is not None:
            return self
        env = dict(os.environ if self._env is None else self._env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "eagle_tui.core.sim", *self.args], stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, env=env,
            )
        self._finalizer = weakref.finalize(self, _kill_quietly, self._process)
        atexit.register(self._finalizer)
        return self

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self.start()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Kill the process if it still runs and reap it; remove a log file we created."""
        if self._process is not None:
            _kill_quietly(self._process)
            if self._finalizer is not None:
                atexit.unregister(self._finalizer)
                self._finalizer.detach()
        if self._own_log and os.environ.get("SIM_KEEP_LOGS") is None:
            self.log_path.unlink(missing_ok=True)

    # ---- facts --------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL of the server, e.g. ``http://127.0.0.1:40123``."""
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        """The process id."""
        return self._require().pid

    @property
    def returncode(self) -> int | None:
        """The exit status once it has ended (negative: killed by that signal), else None."""
        return self._require().poll()

    def log_text(self) -> str:
        """Everything the process has written so far."""
        try:
            return self.log_path.read_bytes().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def log_lines(self) -> list[str]:
        """The log split the way a log parser must split it: on ``\\r`` and ``\\n``."""
        return re.split(r"[\r\n]", self.log_text())

    # ---- signals ------------------------------------------------------------------

    def terminate(self) -> None:
        """Send SIGTERM (SGLang drains, then exits)."""
        self._require().send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """Send SIGKILL."""
        self._require().kill()

    def wait_exit(self, timeout: float = 30.0) -> int:
        """Wait for the process to end; its exit status."""
        return self._require().wait(timeout=timeout)

    async def wait_exit_async(self, timeout: float = 30.0) -> int:
        """``wait_exit`` without blocking the event loop."""
        deadline = time.monotonic() + timeout
        while (code := self.returncode) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"sim pid {self.pid} still running after {timeout} s")
            await asyncio.sleep(_POLL)
        return code

    # ---- waiting on the log -------------------------------------------------------

    def wait_for_line(self, pattern: str | re.Pattern[str], timeout: float = 30.0,
                      *, since: int = 0) -> re.Match[str]:
        """Wait until a log line (split on ``\\r``/``\\n``) matches ``pattern``.

        ``since`` skips that many characters of log (take it from ``mark()``).
        Raises TimeoutError, or SimExited when the process ends first.
        """
        deadline = time.monotonic() + timeout
        while (found := self._search(pattern, since)) is None:
            self._check_waitable(pattern, deadline, timeout)
            time.sleep(_POLL)
        return found

    async def wait_for_line_async(self, pattern: str | re.Pattern[str], timeout: float = 30.0,
                                  *, since: int = 0) -> re.Match[str]:
        """``wait_for_line`` without blocking the event loop."""
        deadline = time.monotonic() + timeout
        while (found := self._search(pattern, since)) is None:
            self._check_waitable(pattern, deadline, timeout)
            await asyncio.sleep(_POLL)
        return found

    def mark(self) -> int:
        """The current end of the log, for ``since=`` in a later wait."""
        return len(self.log_text())

    def wait_bound(self, timeout: float = 30.0) -> None:
        """Wait until the port is bound (``/health`` answers, 503 until ready)."""
        self.wait_for_line(BOUND_LINE, timeout)

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until the warm-up is done and ``/health`` answers 200."""
        self.wait_for_line(READY_LINE, timeout)

    async def wait_ready_async(self, timeout: float = 30.0) -> None:
        """``wait_ready`` without blocking the event loop."""
        await self.wait_for_line_async(READY_LINE, timeout)

    def _search(self, pattern: str | re.Pattern[str], since: int) -> re.Match[str] | None:
        compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
        for line in re.split(r"[\r\n]", self.log_text()[since:]):
            found = compiled.search(line)
            if found is not None:
                return found
        return None

    def _check_waitable(self, pattern: str | re.Pattern[str], deadline: float,
                        timeout: float) -> None:
        shown = pattern if isinstance(pattern, str) else pattern.pattern
        if self.returncode is not None and self._lost_its_port():
            self._start_on_new_port()
        elif self.returncode is not None:
            raise SimExited(f"sim exited with {self.returncode} before a line matched "
                            f"{shown!r}; log tail:\n{self._tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no line matched {shown!r} within {timeout} s; log tail:\n"
                               f"{self._tail()}")

    def _lost_its_port(self) -> bool:
        """True when another process took the free port we chose between our probe and the
        sim's bind (with many sims and test workers starting at once, it happens)."""
        return self._rebinds_left > 0 and self.returncode != 0 and bool(
            _BIND_FAILED.search(self.log_text()))

    def _start_on_new_port(self) -> None:
        self._rebinds_left -= 1
        self.port = free_port(self.host)
        self.args = [*self._given_args, "--host", self.host, "--port", str(self.port)]
        if self._finalizer is not None:
            atexit.unregister(self._finalizer)
            self._finalizer.detach()
        self._process = None
        self.log_path.write_bytes(b"")  # the next wait reads only the new attempt's log
        self.start()

    def _tail(self, lines: int = 15) -> str:
        return "\n".join(line[:300] for line in self.log_text().splitlines()[-lines:])

    def _require(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            raise RuntimeError("SimProcess not started; use start() or a with block")
        return self._process


def _kill_quietly(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL always ends it
        process.wait(timeout=10)

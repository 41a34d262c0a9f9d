"""SGLang's own router (PyPI ``sglang-router``) as a process in front of simulated servers.

``RouterProcess`` runs ``python -m sglang_router.launch_router`` on loopback only (router and
its Prometheus port), logs to a file and is killed on exit. Flags default to what a capture
wants (docs/large-capture.md): round robin, short health checks; a test passes its own.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx

from eagle_tui.core.sim.launcher import free_port
from support.waiting import poll_until

CAPTURE_FLAGS = (
    "--policy", "round_robin",
    "--health-check-interval-secs", "1",
    "--health-failure-threshold", "2",
    "--health-success-threshold", "1",
    "--worker-startup-check-interval", "1",
    "--log-level", "warn",
)


def router_installed() -> bool:
    """True when ``sglang_router`` imports in this interpreter."""
    try:
        import sglang_router  # noqa: F401
    except ImportError:
        return False
    return True


class RouterProcess:
    """One router process in front of ``workers``."""

    def __init__(self, workers: Sequence[str], *, flags: Sequence[str] = CAPTURE_FLAGS) -> None:
        self.port = free_port()
        self.metrics_port = free_port()
        self.workers = list(workers)
        self.flags = list(flags)
        self.log_path = Path(tempfile.mkstemp(prefix="router-", suffix=".log")[1])
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}"

    @property
    def pid(self) -> int:
        """The router's process id (for its CPU times)."""
        if self._process is None:
            raise RuntimeError("the router has not been started")
        return self._process.pid

    def start(self) -> Self:
        command = [sys.executable, "-m", "sglang_router.launch_router",
                   "--host", "127.0.0.1", "--port", str(self.port),
                   "--prometheus-host", "127.0.0.1", "--prometheus-port", str(self.metrics_port),
                   *self.flags]
        if self.workers:
            command += ["--worker-urls", *self.workers]
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT)
        return self

    def wait_serving(self, timeout: float = 60.0) -> None:
        """Until the router answers HTTP (its workers may still be missing)."""
        self._wait(lambda body: True, "/liveness", timeout)

    def wait_workers(self, healthy: int, timeout: float = 60.0) -> None:
        """Until ``/readiness`` counts ``healthy`` healthy workers."""
        self._wait(lambda body: body.get("healthy_workers") == healthy, "/readiness", timeout)

    def _wait(self, done: object, path: str, timeout: float) -> None:
        def answered() -> bool:
            with contextlib.suppress(httpx.HTTPError, ValueError):
                response = httpx.get(self.url + path, timeout=2)
                body = response.json() if path == "/readiness" else {}
                return response.status_code < 500 and callable(done) and bool(done(body))
            return False

        def gone() -> str | None:
            alive = self._process is not None and self._process.poll() is None
            return None if alive else f"the router exited\n{self.log_tail()}"

        if not poll_until(answered, timeout, every=0.1, unless=gone):
            raise AssertionError(f"router {self.url}{path} not as wanted in {timeout} s\n"
                                 f"{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=10)
        self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

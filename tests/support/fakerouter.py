"""A hostile stand-in for SGLang's router on a real socket (issue 24 items 3 and 5), and a spy.

``FakeRouter`` answers ``/workers`` with the list it is given (any number of entries, any
URLs: other hosts, ``file://``, user info, query strings), ``/readiness`` and ``/health`` with
200, and passes every other request (``/generate``, ``/model_info``, ...) to ``upstream``
(a simulated server) as it is, so a capture through it stores real rows. ``Spy`` answers
everything 200 and records each request's path and ``Authorization`` header: a worker URL
pointing at it shows whether anything (the API key) was sent there.

Both run in a thread of the test process; ``python fakerouter.py N UPSTREAM SPY_URL`` runs a
router listing N workers (the first the upstream, the rest the spy with distinct paths) as
its own process, printing ``READY <port>`` (for the RSS measurement, so the router's own
memory is not counted).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Self


def forward(upstream: str, handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, bytes, str]:
    """``handler``'s request sent on to ``upstream``: its status, body and content type (an
    error status passed through as it came)."""
    request = urllib.request.Request(
        f"{upstream}{handler.path}", data=body if handler.command == "POST" else None,
        method=handler.command,
        headers={"Content-Type": handler.headers.get("Content-Type", "application/json")})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return (response.status, response.read(),
                    response.headers.get("Content-Type", "application/json"))
    except urllib.error.HTTPError as e:
        return e.code, e.read(), "application/json"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Served

    def do_GET(self) -> None:
        self.server.owner.answer(self)

    def do_POST(self) -> None:
        self.server.owner.answer(self)

    def log_message(self, format: str, *args: object) -> None:
        return


class _Served(_Server):
    owner: _Base


class _Base:
    """A ThreadingHTTPServer on 127.0.0.1 with a port from the OS, in a daemon thread."""

    def __init__(self) -> None:
        self._server = _Served(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    @staticmethod
    def send(handler: BaseHTTPRequestHandler, status: int, body: bytes,
             kind: str = "application/json") -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


class Spy(_Base):
    """Answers 200 ``{}`` to everything; ``seen`` holds (path, Authorization header)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str | None]] = []
        self._lock = threading.Lock()

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        _read_body(handler)
        with self._lock:
            self.seen.append((handler.path, handler.headers.get("Authorization")))
        self.send(handler, 200, b"{}")


class FakeRouter(_Base):
    """A router listing ``workers`` (all healthy) in front of ``upstream``."""

    def __init__(self, workers: Sequence[str], upstream: str | None = None) -> None:
        super().__init__()
        self.upstream = upstream
        self.keys: list[str | None] = []  # Authorization of every request to the router
        entries = [{"url": url, "is_healthy": True, "load": 0, "model_id": "m",
                    "worker_type": "regular", "metadata": {}} for url in workers]
        self._workers = json.dumps({"workers": entries, "total": len(entries)}).encode()

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        self.keys.append(handler.headers.get("Authorization"))
        path = handler.path
        if path == "/workers":
            self.send(handler, 200, self._workers)
        elif path in ("/readiness", "/health"):
            _read_body(handler)
            self.send(handler, 200, b'{"status": "ready"}')
        elif self.upstream is None:
            _read_body(handler)
            self.send(handler, 404, b'{"error": "no upstream"}')
        else:
            self._forward(handler)

    def _forward(self, handler: BaseHTTPRequestHandler) -> None:
        self.send(handler, *forward(self.upstream, handler, _read_body(handler)))


class NoWorkerRouter(FakeRouter):
    """A router whose workers are listed healthy but which answers every POST 503
    ``no_available_workers`` (as SGLang's router 0.3.2 does when it holds every worker
    unhealthy or circuit-open); ``posts`` holds the monotonic time of each POST."""

    BODY = json.dumps({"error": {"type": "service_unavailable", "code": "no_available_workers",
                                 "message": "No available workers"}}).encode()

    def __init__(self, workers: Sequence[str]) -> None:
        super().__init__(workers)
        self.posts: list[float] = []

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        if handler.command != "POST":
            super().answer(handler)
            return
        _read_body(handler)
        self.posts.append(time.monotonic())
        self.send(handler, 503, self.BODY)


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


def many_workers(count: int, first: str, spy: str) -> list[str]:
    """``first`` and then ``count - 1`` distinct worker URLs on the spy (a path each)."""
    return [first, *(f"{spy}/w{i}" for i in range(1, count))]


def main(argv: Sequence[str]) -> None:
    count, upstream, spy = int(argv[0]), argv[1], argv[2]
    with FakeRouter(many_workers(count, upstream, spy), upstream) as router:
        print(f"READY {router.port}", flush=True)
        sys.stdin.read()  # until the parent closes our stdin


if __name__ == "__main__":
    main(sys.argv[1:])


def run_measured(argv: Sequence[str], *, env: dict[str, str], cwd: str, timeout: float,
                 workdir: str) -> tuple[int, str, str, float]:
    """Run ``argv`` to its end; (exit code, stdout, stderr, peak RSS in MiB of that process,
    from ``wait4`` in a small launcher: the kernel's own high-water mark, not a sample, and not
    this test worker's size inherited through ``fork``)."""
    import subprocess

    out_path, err_path = f"{workdir}/measured.out", f"{workdir}/measured.err"
    rss_path = f"{workdir}/measured.rss"
    launcher = [sys.executable, str(Path(__file__).with_name("peak_rss.py")), rss_path,
                str(timeout), "--"]
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        done = subprocess.run([*launcher, *argv], stdout=out, stderr=err,
                              stdin=subprocess.DEVNULL, env=env, cwd=cwd)
    with open(out_path, encoding="utf-8", errors="replace") as out_text, \
            open(err_path, encoding="utf-8", errors="replace") as err_text, \
            open(rss_path, encoding="ascii") as rss_text:
        return done.returncode, out_text.read(), err_text.read(), int(rss_text.read()) / 1024

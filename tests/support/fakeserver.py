"""Test helper run as a script: a stand-in server process whose life a replay controls.

It prints ``READY <pid>`` and then obeys one command per stdin line, so a replayed log and
the process agree (SGLang keeps its port closed while loading, answers ``/health`` 503
while warming up, 200 once ready, and the port closes when the process dies):

    listen PORT     start answering HTTP on 127.0.0.1:PORT (/health: 503 until `health 200`)
    health CODE     the status ``GET /health`` answers from now on
    close           stop listening
    exit CODE       exit with that code
    signal NUM      die by that signal (default action)

Extra command-line arguments (markers such as ``sglang.launch_server --port N``) are
ignored, so tests can shape how the process table sees it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_status = 503


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        code = _status if self.path.startswith("/health") else 404
        body = b"" if code == 200 else b'{"error": "not ready"}'
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return  # the replayed log is the server's log; this process writes none


def main() -> None:
    global _status
    server: ThreadingHTTPServer | None = None
    print(f"READY {os.getpid()}", flush=True)
    for raw in sys.stdin:
        command, _, value = raw.strip().partition(" ")
        if command == "listen" and server is None:
            server = ThreadingHTTPServer(("127.0.0.1", int(value)), _Handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
        elif command == "health":
            _status = int(value)
        elif command == "close" and server is not None:
            server.shutdown()
            server.server_close()
            server = None
        elif command == "exit":
            os._exit(int(value))
        elif command == "signal":
            if int(value) not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(int(value), signal.SIG_DFL)
            os.kill(os.getpid(), int(value))
        print(f"OK {command}", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()

"""A hostile proxy in front of a real (simulated) SGLang server: it passes every request on
and rewrites what the answers claim (issue 39 item 12).

``python meta_proxy.py UPSTREAM REWRITE`` listens on a free port, prints ``READY <port>`` and
forwards every request to ``UPSTREAM`` as it is; ``REWRITE`` is JSON:

    {"meta_info": {...}}    merged into the ``meta_info`` of every ``/generate`` answer
                            (``spec_num_proposed_drafts: 10**15`` and the like; the ids stay
                            the server's own)
    {"server_info": {...}}  merged into every ``internal_states`` entry of ``/server_info``
                            (``avg_spec_accept_length: 1e308``)

Numbers too large for JSON's usual range are written as they are (``10**400`` as 401
digits). It stops when its parent closes its stdin.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread
from typing import Any

from fakerouter import forward  # run as a script: tests/support is on sys.path

sys.set_int_max_str_digits(0)  # a rewrite may hold 10**400


class Proxy(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, upstream: str, rewrite: dict[str, Any]) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.upstream = upstream
        self.rewrite = rewrite


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Proxy

    def do_GET(self) -> None:
        self.forward()

    def do_POST(self) -> None:
        self.forward()

    def log_message(self, format: str, *args: object) -> None:
        return

    def forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        status, data, kind = forward(self.server.upstream, self, body)
        if status == 200 and kind.startswith("application/json"):
            data = rewritten(self.path, data, self.server.rewrite)
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def rewritten(path: str, data: bytes, rewrite: dict[str, Any]) -> bytes:
    """``data`` with the rewrite for ``path`` merged in (unchanged for other paths)."""
    if path.startswith("/generate") and "meta_info" in rewrite:
        body = json.loads(data)
        for answer in body if isinstance(body, list) else [body]:
            answer["meta_info"].update(rewrite["meta_info"])
    elif path.startswith(("/server_info", "/get_server_info")) and "server_info" in rewrite:
        body = json.loads(data)
        for state in body.get("internal_states") or []:
            state.update(rewrite["server_info"])
    else:
        return data
    return json.dumps(body).encode()


def main(upstream: str, rewrite: str) -> None:
    proxy = Proxy(upstream, json.loads(rewrite))
    Thread(target=proxy.serve_forever, daemon=True).start()
    print(f"READY {proxy.server_address[1]}", flush=True)
    sys.stdin.read()  # until the parent closes it
    proxy.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])



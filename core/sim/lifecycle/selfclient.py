"""A minimal HTTP/1.1 client for the server's requests to itself (the warm-up).

The warm-up only needs status codes from three loopback calls; a few lines on
asyncio streams spare every sim process the import of a full HTTP client
(httpx pulls in a lot at import time, and tests start many sims).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any


async def request_status(host: str, port: int, method: str, path: str,
                         body: Any = None, headers: dict[str, str] | None = None) -> int:
    """Send one request (``Connection: close``) and return the response's status code."""
    payload = b"" if body is None else json.dumps(body).encode()
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close",
             f"Content-Length: {len(payload)}", "Content-Type: application/json",
             *(f"{name}: {value}" for name, value in (headers or {}).items())]
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write("\r\n".join(lines).encode() + b"\r\n\r\n" + payload)
        await writer.drain()
        status_line = await reader.readline()
        await reader.read()  # drain until the server closes the connection
    finally:
        writer.close()
    parts = status_line.split()
    if len(parts) < 2 or not parts[1].isdigit():
        raise ConnectionError(f"bad status line from {host}:{port}{path}: {status_line!r}")
    return int(parts[1])

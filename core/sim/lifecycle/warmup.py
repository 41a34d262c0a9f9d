"""The warm-up SGLang runs once its port is bound, and the "ready" moment after it.

Like SGLang's warm-up thread: wait, poll the server's own ``/model_info`` until it
answers, send one small ``/generate`` and ``/freeze_gc`` to itself, then mark the
server ready (``/health`` turns 200) and print the "fired up" line. Until then
``/health`` answers 503 while ``/model_info`` and ``/v1/models`` already answer 200.

The three loopback calls only need status codes: a few lines on asyncio streams
(``request_status``) spare every sim process the import of a full HTTP client
(httpx pulls in a lot at import time, and tests start many sims).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Final

from eagle_tui.core.sim.context import SimContext
from eagle_tui.core.sim.lifecycle import startup_faults
from eagle_tui.core.sim.log.death import kill_process_tree

WARMUP_BODY: Final = {"text": "The capital city of France is",
                      "sampling_params": {"temperature": 0, "max_new_tokens": 8}}
_RETRY_DELAY: Final = 0.01  # the port may not be bound yet when the first poll goes out


async def warm_up(ctx: SimContext) -> None:
    """Warm the server up and mark it ready (or fail as configured)."""
    started = time.monotonic()
    ctx.state.enter("warming_up")
    seconds = ctx.config.phase_seconds("warming_up")
    headers = {"Authorization": f"Bearer {ctx.config.api_key}"} if ctx.config.api_key else {}
    host, port = ctx.config.host, ctx.config.port
    point = startup_faults.trigger_point(ctx.config, "warming_up")
    await asyncio.sleep(seconds)
    if point is not None and ctx.config.stall_at == "warming_up":
        await startup_faults.stall()
    await _poll_model_info(host, port, headers)
    if point is not None:
        await startup_faults.fire(ctx.config, ctx.log, "warming_up")
    status = await request_status(host, port, "POST", "/generate", WARMUP_BODY, headers)
    if status != 200:
        ctx.log.main(f"Initialization failed. warmup error: /generate answered {status}")
        kill_process_tree(ctx.log)
    await request_status(host, port, "POST", "/freeze_gc", None, headers)
    ctx.state.phase_seconds["warming_up"] = time.monotonic() - started
    ctx.state.mark_ready()
    ctx.log.main("The server is fired up and ready to roll!")


async def _poll_model_info(host: str, port: int, headers: dict[str, str]) -> None:
    while True:
        try:
            if await request_status(host, port, "GET", "/model_info", None, headers) == 200:
                return
        except OSError:  # not listening yet
            pass
        await asyncio.sleep(_RETRY_DELAY)


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

"""The client lets an idle connection go before SGLang's server would close it.

Real SGLang 0.5.23 serves with uvicorn's keep-alive of 5 s (``SGLANG_TIMEOUT_KEEP_ALIVE``),
the same as httpx's default pool expiry: a request sent on a connection idle for 5 s can
meet the server closing it ("Server disconnected without sending a response"), which costs
the row an attempt and pauses the server. Measured over real sockets: how many connections
a server sees for two requests, back to back and after an idle gap between our expiry
(4 s) and SGLang's (5 s).
"""

from __future__ import annotations

import asyncio

from eagle_tui.core.sglang import SGLangClient
from eagle_tui.core.sglang.client import KEEPALIVE_EXPIRY_S

SGLANG_KEEP_ALIVE_S = 5.0  # sglang/srt/environ.py: SGLANG_TIMEOUT_KEEP_ALIVE = EnvInt(5)


async def connections_for_two_health_checks(gap_s: float) -> int:
    """Connections a real server accepts for two ``/health`` calls ``gap_s`` apart."""
    accepted = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, SGLangClient(f"http://127.0.0.1:{port}") as client:
        await client.health()
        await asyncio.sleep(gap_s)
        await client.health()
    return accepted


async def test_a_busy_connection_is_reused() -> None:
    assert await connections_for_two_health_checks(0.0) == 1


async def test_an_idle_connection_is_dropped_before_sglang_would_close_it() -> None:
    assert KEEPALIVE_EXPIRY_S < SGLANG_KEEP_ALIVE_S
    gap = (KEEPALIVE_EXPIRY_S + SGLANG_KEEP_ALIVE_S) / 2
    assert await connections_for_two_health_checks(gap) == 2

"""The client lets an idle connection go before SGLang's server would close it.

Real SGLang 0.5.23 serves with uvicorn's keep-alive of 5 s (``SGLANG_TIMEOUT_KEEP_ALIVE``),
the same as httpx's default pool expiry: a request sent on a connection idle for 5 s can
meet the server closing it ("Server disconnected without sending a response"), which costs
the row an attempt and pauses the server. Measured over real sockets: how many connections
a server sees for two requests, back to back and after an idle gap between our expiry
(4 s) and SGLang's (5 s), both scaled down tenfold so the test waits 0.45 s, not 4.5 s
(the pools read the expiry when they are built: every client built here gets the scaled one).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eagle_tui.core.capture import servers
from eagle_tui.core.capture.config import CaptureConfig
from eagle_tui.core.capture.servers import default_client_factory
from eagle_tui.core.sglang import SGLangClient, client
from eagle_tui.core.sglang.client import KEEPALIVE_EXPIRY_S
from eagle_tui.core.tokenizer import bundled_tokenizer_path
from eagle_tui.core.urls import ServerURL

SGLANG_KEEP_ALIVE_S = 5.0  # sglang/srt/environ.py: SGLANG_TIMEOUT_KEEP_ALIVE = EnvInt(5)


def plain_client(url: str) -> Any:
    return SGLangClient(ServerURL.parse(url))


def capture_client(url: str) -> Any:
    """The clients a capture batch uses (small pools with transports of their own)."""
    config = CaptureConfig(prompts=Path("p.jsonl"), out_dir=Path("out"),
                           servers=(ServerURL.parse(url),),
                           tokenizer=bundled_tokenizer_path())
    return default_client_factory(config)(config.servers[0])


MAKERS = pytest.mark.parametrize("make", [plain_client, capture_client],
                                 ids=["SGLangClient", "capture"])


async def connections_for_two_health_checks(gap_s: float,
                                            make: Callable[[str], Any] = plain_client) -> int:
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
    async with server:
        client = make(f"http://127.0.0.1:{port}")
        try:
            await client.health()
            await asyncio.sleep(gap_s)
            await client.health()
        finally:
            await client.aclose()
    return accepted


@MAKERS
async def test_a_busy_connection_is_reused(make: Callable[[str], Any]) -> None:
    assert await connections_for_two_health_checks(0.0, make) == 1


@MAKERS
async def test_an_idle_connection_is_dropped_before_sglang_would_close_it(
        make: Callable[[str], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    assert KEEPALIVE_EXPIRY_S < SGLANG_KEEP_ALIVE_S
    scale = 0.1
    for module in (client, servers):  # the plain client's pool; the capture's transports
        monkeypatch.setattr(module, "KEEPALIVE_EXPIRY_S", KEEPALIVE_EXPIRY_S * scale)
    gap = (KEEPALIVE_EXPIRY_S + SGLANG_KEEP_ALIVE_S) / 2 * scale
    assert await connections_for_two_health_checks(gap, make) == 2

"""The capture's ``LeanTransport`` over real sockets: what it reuses, what it refuses to reuse,
and every failure raised as the httpx exception the client maps (``core.sglang.client``).

Each test serves from an asyncio server in the test's own loop, scripted per connection, and
counts the connections it accepted and the ones the client closed.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from support.waiting import async_wait_until

from eagle_tui.core.errors import ConnectionLost, ServerTimeout
from eagle_tui.core.sglang import SGLangClient
from eagle_tui.core.sglang.transport import READ_BUFFER_LIMIT, LeanTransport
from eagle_tui.core.urls import ServerURL

OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class Served:
    url: str
    accepted: int = 0
    closed_by_client: int = 0
    requests: list[bytes] = field(default_factory=list)


async def answer_each(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      answer: bytes = OK) -> None:
    """Answer every request on the connection with ``answer``."""
    while head := await reader.readuntil(b"\r\n\r\n"):
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        await reader.readexactly(length)
        writer.write(answer)
        await writer.drain()


@asynccontextmanager
async def serving(handler: Handler = answer_each) -> AsyncIterator[Served]:
    served = Served("")

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served.accepted += 1
        try:
            await handler(reader, writer)
            if await reader.read() == b"":  # the handler is done: wait for the client's close
                served.closed_by_client += 1
        except asyncio.IncompleteReadError as exc:
            served.requests.append(exc.partial)
            served.closed_by_client += 1
        except ConnectionError:
            served.closed_by_client += 1
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    served.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with server:
        yield served


def client_for(url: str, transport: LeanTransport | None = None,
               **timeouts: float) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(5.0, **timeouts),
                             transport=transport or LeanTransport(max_connections=4))


async def test_a_read_connection_is_reused_and_a_body_left_unread_closes_its_own() -> None:
    async with serving() as served, client_for(served.url) as client:
        for _ in range(3):
            assert (await client.get("/health")).content == b"ok"
        assert served.accepted == 1
        async with client.stream("GET", "/health") as response:
            assert response.status_code == 200  # body never read: the connection can't be reused
        await async_wait_until(lambda: served.closed_by_client == 1, 5, "the close")
        assert (await client.get("/health")).content == b"ok"
        assert served.accepted == 2


async def test_an_idle_connection_past_its_expiry_is_not_reused() -> None:
    transport = LeanTransport(keepalive_expiry=0.0)
    async with serving() as served, client_for(served.url, transport) as client:
        await client.get("/health")
        await client.get("/health")
        assert served.accepted == 2


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async def once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(OK)  # keep-alive announced, then closed: uvicorn at its keep-alive end
        await writer.drain()
        writer.close()

    transport = LeanTransport()
    async with serving(once) as served, client_for(served.url, transport) as client:
        await client.get("/health")
        await async_wait_until(lambda: transport.idle_connections() == 0, 5,
                               "the server's close seen")
        assert (await client.get("/health")).content == b"ok"
        assert served.accepted == 2


async def test_an_answer_with_connection_close_is_not_followed_by_a_reuse() -> None:
    closing = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok"

    async def close_after(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(closing)
        await writer.drain()  # and the connection stays open: the client must close it

    async with serving(close_after) as served, client_for(served.url) as client:
        for _ in range(2):
            assert (await client.get("/health")).content == b"ok"
        await async_wait_until(lambda: served.closed_by_client == 2, 5, "the client's closes")
        assert served.accepted == 2


async def test_bytes_arriving_on_an_idle_connection_make_it_unusable() -> None:
    async def chatty(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(OK + b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nnope")  # unasked
        await writer.drain()
        await answer_each(reader, writer)

    transport = LeanTransport()
    async with serving(chatty) as served, client_for(served.url, transport) as client:
        await client.get("/health")
        await async_wait_until(lambda: transport.idle_connections() == 0, 5,
                               "the unasked bytes seen")
        assert (await client.get("/health")).content == b"ok"
        assert served.accepted == 2


async def test_a_slow_answer_is_a_read_timeout_and_the_connection_is_closed() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await reader.read()  # never answers; returns when the client closes

    async with serving(silent) as served, client_for(served.url, read=0.2) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.get("/health")
        await async_wait_until(lambda: served.closed_by_client == 1, 5, "the close")
        assert served.accepted == 1


async def test_a_cancelled_request_closes_its_connection() -> None:
    """How the capture aborts: the server sees the disconnect (SGLang aborts the request)."""
    got_request = asyncio.Event()
    closed = asyncio.Event()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        got_request.set()
        await reader.read()  # the body, then the end: the client closed
        closed.set()

    async with serving(hold) as served, client_for(served.url) as client:
        task = asyncio.create_task(client.post("/generate", json={"input_ids": [1]}))
        await asyncio.wait_for(got_request.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(closed.wait(), 5)
        assert served.accepted == 1


@pytest.mark.parametrize("answer, message", [
    (b"", "Server disconnected without sending a response."),
    (b"garbage\r\n\r\n", "illegal status line"),
    (b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc", "peer closed connection"),
], ids=["nothing", "garbage", "short body"])
async def test_a_broken_answer_is_a_remote_protocol_error(answer: bytes, message: str) -> None:
    async def broken(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        writer.close()

    async with serving(broken) as served, client_for(served.url) as client:
        with pytest.raises(httpx.RemoteProtocolError, match=message):
            await client.get("/health")


async def test_the_sglang_client_types_the_transport_failures() -> None:
    async def slow_then_broken(reader: asyncio.StreamReader,
                               writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc")
        await writer.drain()
        writer.close()

    async with serving(slow_then_broken) as served:
        client = SGLangClient(ServerURL.parse(served.url), transport=LeanTransport())
        try:
            with pytest.raises(ConnectionLost, match="connection dropped"):
                await client.health()
        finally:
            await client.aclose()


async def test_a_refused_connection_is_a_connect_error() -> None:
    server = await asyncio.start_server(answer_each, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    server.close()
    await server.wait_closed()
    async with client_for(url) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get("/health")


async def test_a_full_pool_waits_for_a_connection_then_times_out() -> None:
    release = asyncio.Event()

    async def held(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await release.wait()
        writer.write(OK)
        await writer.drain()
        await answer_each(reader, writer)

    async with serving(held) as served, client_for(
            served.url, LeanTransport(max_connections=1), pool=0.2) as client:
        first = asyncio.create_task(client.get("/health"))
        await async_wait_until(lambda: served.accepted == 1, 5, "the first connection")
        with pytest.raises(httpx.PoolTimeout):
            await client.get("/health")
        second = asyncio.create_task(client.get("/health", timeout=httpx.Timeout(5.0, pool=None)))
        release.set()
        assert (await first).content == b"ok" and (await second).content == b"ok"
        assert served.accepted == 1  # the second waited for the first's connection


async def test_a_large_chunked_body_is_read_whole_through_the_read_limit() -> None:
    body = bytes(range(256)) * (3 * READ_BUFFER_LIMIT // 256)

    async def chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        for start in range(0, len(body), 50_000):
            part = body[start:start + 50_000]
            writer.write(b"%x\r\n%s\r\n" % (len(part), part))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        await answer_each(reader, writer)

    async with serving(chunked) as served, client_for(served.url) as client:
        async with client.stream("GET", "/big") as response:
            assert await response.aread() == body
        assert (await client.get("/health")).content == b"ok"
        assert served.accepted == 1


async def test_a_request_body_arrives_whole() -> None:
    async with serving() as served, client_for(served.url) as client:
        ids = list(range(50_000))
        response = await client.post("/generate", json={"input_ids": ids})
        assert response.content == b"ok"


async def test_the_sglang_client_times_out_on_a_trickle() -> None:
    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n")
        while True:
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(0.02)

    async with serving(trickle) as served:
        client = SGLangClient(ServerURL.parse(served.url), transport=LeanTransport())
        try:
            with pytest.raises(ServerTimeout):
                await client.health(timeout=0.3)
        finally:
            await client.aclose()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A throwaway self-signed certificate for 127.0.0.1 (made by the openssl program)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl program to make a certificate")
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


async def test_https_checks_the_certificate_and_reuses_the_connection(
        certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    accepted = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        with suppress(asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            await answer_each(reader, writer)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_side)
    url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with server:
        trusting = ssl.create_default_context(cafile=str(cert))
        async with client_for(url, LeanTransport(verify=trusting)) as client:
            assert (await client.get("/health")).content == b"ok"
            assert (await client.get("/health")).content == b"ok"
        assert accepted == 1
        async with client_for(url, LeanTransport()) as client:  # the system's CAs only
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await client.get("/health")

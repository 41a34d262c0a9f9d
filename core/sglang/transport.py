"""A lean HTTP/1.1 transport for httpx: h11 over asyncio protocols, a pool that costs O(1).

Measured on the capture's fastest-sim benchmark, httpcore's pool (under httpx's default
transport) was the largest single cost of a request: it re-examines every pooled connection
when a request starts or ends, with a ``poll`` system call each to see whether the server
closed it, through anyio's locks and cancel scopes. This transport sits under the same
``httpx.AsyncClient`` (requests, responses, timeouts and the errors callers catch stay
httpx's) and per request only takes the most recently idle connection, sends through h11
and reads.

What a reused connection must not be, known without a system call: idle longer than
``keepalive_expiry`` (SGLang's uvicorn closes at 5 s), closed by the server (the event loop
has told us), or holding bytes nobody asked for. A connection is reused only after a
response read to its end; a body not read to the end (an abandoned or cancelled request,
an answer over its size limit) closes it, which is how SGLang learns to abort the request.

httpx's timeouts keep their meaning: ``connect``, ``write`` and ``read`` per operation and
``pool`` for waiting on a free connection, each raising httpx's exception of that name.
Received bytes wait here and are fed to h11 only when the response is read, and reading from
the socket pauses while more than :data:`READ_BUFFER_LIMIT` bytes wait, so a server cannot
fill memory faster than the caller reads (the size limits are ``core.sglang.limits``').
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import h11
import httpx

READ_BUFFER_LIMIT = 256 << 10
"""Bytes received but not yet read by the caller before the socket stops being read."""

WRITE_CHUNK = 64 << 10
"""Request body bytes gathered into one write."""

_Key = tuple[str, str, int]


class LeanTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 (``http://`` and ``https://``) with at most ``max_connections`` open at once,
    idle ones kept for ``keepalive_expiry`` seconds."""

    def __init__(self, *, verify: ssl.SSLContext | None = None, max_connections: int = 100,
                 keepalive_expiry: float = 5.0) -> None:
        self._tls = verify
        self._max = max_connections
        self._expiry = keepalive_expiry
        self._idle: dict[_Key, list[_Connection]] = {}
        self._open = 0  # connections open or being opened, idle included
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` on a pooled connection; the response's body streams from it."""
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        url = request.url
        key = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        connection = await self._connection_for(key, request, timeouts)
        try:
            await connection.send(request, timeouts.get("write"))
            status, headers, reason = await connection.receive_head(request, timeouts.get("read"))
        except BaseException:
            self._discard(connection)
            raise
        return httpx.Response(
            status, headers=headers,
            stream=_Body(self, key, connection, request, timeouts.get("read")),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason},
        )

    def idle_connections(self) -> int:
        """How many idle connections could take the next request."""
        return sum(c.reusable() for idle in self._idle.values() for c in idle)

    async def aclose(self) -> None:
        """Close every idle connection; connections in use close when their body does."""
        self._closed = True
        for connections in self._idle.values():
            for connection in connections:
                self._discard(connection)
        self._idle.clear()

    # -- the pool ------------------------------------------------------------------

    async def _connection_for(self, key: _Key, request: httpx.Request,
                              timeouts: dict[str, float | None]) -> _Connection:
        """An idle connection to ``key``, else a new one when there is room, else the first
        of those once one is released (waiting at most the ``pool`` timeout in all)."""
        if self._closed:
            raise RuntimeError("the transport is closed")
        pool = timeouts.get("pool")
        deadline: float | None = None  # set at the first wait
        while True:
            connection = self._reuse(key)
            if connection is not None:
                return connection
            if self._open < self._max or self._close_an_idle_one():
                return await self._connect(key, request, timeouts.get("connect"))
            if deadline is None and pool is not None:
                deadline = asyncio.get_running_loop().time() + pool
            await self._wait_for_a_release(request, deadline)

    def _reuse(self, key: _Key) -> _Connection | None:
        """The most recently idle connection to ``key`` still fit to send on, if any."""
        idle = self._idle.get(key)
        if not idle:
            return None
        oldest_kept = time.monotonic() - self._expiry
        while idle:
            connection = idle.pop()
            if connection.reusable() and connection.idle_since > oldest_kept:
                return connection
            self._discard(connection)
        return None

    async def _connect(self, key: _Key, request: httpx.Request,
                       timeout: float | None) -> _Connection:
        if key[0] == "https" and self._tls is None:
            self._tls = ssl.create_default_context()  # once: it costs ~35 ms
        self._open += 1
        try:
            return await _open_connection(key, self._tls, request, timeout)
        except BaseException:
            self._gone()
            raise

    def _close_an_idle_one(self) -> bool:
        """Make room by closing the oldest idle connection (to another host: there is none
        to this one)."""
        for connections in self._idle.values():
            if connections:
                self._discard(connections.pop(0))
                return True
        return False

    async def _wait_for_a_release(self, request: httpx.Request, deadline: float | None) -> None:
        """Until a connection is released or closed, or ``deadline`` (loop time; httpx's
        PoolTimeout)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                await waiter
        except BaseException as exc:
            if waiter.cancelled():  # not woken: no longer waiting
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            else:  # woken, but leaving: the release goes to the next in line
                self._wake_next()
            if isinstance(exc, TimeoutError):
                raise httpx.PoolTimeout("no free connection in time", request=request) from None
            raise

    def _release(self, key: _Key, connection: _Connection) -> None:
        """A response read to its end: keep its connection for the next request."""
        if self._closed or not connection.start_next_cycle():
            self._discard(connection)
            return
        connection.idle_since = time.monotonic()
        self._idle.setdefault(key, []).append(connection)
        self._wake_next()

    def _discard(self, connection: _Connection) -> None:
        connection.close()
        self._gone()

    def _gone(self) -> None:
        self._open -= 1
        self._wake_next()

    def _wake_next(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


async def _open_connection(key: _Key, tls: ssl.SSLContext | None, request: httpx.Request,
                           timeout: float | None) -> _Connection:
    scheme, host, port = key
    loop = asyncio.get_running_loop()
    context = tls if scheme == "https" else None
    try:
        async with asyncio.timeout(timeout):
            _, connection = await loop.create_connection(
                _Connection, host, port, ssl=context,
                server_hostname=host if context is not None else None)
    except TimeoutError:
        raise httpx.ConnectTimeout(f"no connection to {host}:{port} within {timeout:g} s",
                                   request=request) from None
    except OSError as exc:
        raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
    return connection


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: what arrived waits in ``_received`` until h11 is asked."""

    def __init__(self) -> None:
        self.h11 = h11.Connection(h11.CLIENT)
        self.idle_since = 0.0
        self._transport: asyncio.Transport | None = None
        self._received: list[bytes] = []
        self._buffered = 0
        self._fed = 0  # bytes given to h11 in this request's cycle
        self._eof = False
        self._lost: Exception | None = None
        self._paused = False
        self._wakeup: asyncio.Future[None] | None = None
        self._can_write: asyncio.Future[None] | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._received.append(data)
        self._buffered += len(data)
        if self._buffered > READ_BUFFER_LIMIT and not self._paused and self._transport:
            self._paused = True
            self._transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._lost = exc
        self._transport = None
        self._wake()
        if self._can_write is not None and not self._can_write.done():
            self._can_write.set_result(None)

    def pause_writing(self) -> None:
        self._can_write = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._can_write is not None and not self._can_write.done():
            self._can_write.set_result(None)
        self._can_write = None

    # -- for the transport -------------------------------------------------------------

    def reusable(self) -> bool:
        """Open, nothing received while idle, and h11 ready for a new request."""
        return (self._transport is not None and not self._eof and not self._received
                and self.h11.our_state is h11.IDLE and self.h11.their_state is h11.IDLE)

    def start_next_cycle(self) -> bool:
        """After a complete exchange: ready for the next one (False: must close)."""
        if self.h11.our_state is not h11.DONE or self.h11.their_state is not h11.DONE:
            return False
        self.h11.start_next_cycle()
        self._fed = 0
        unasked, _ = self.h11.trailing_data  # bytes after the response: nobody asked for them
        return self._transport is not None and not self._eof and not unasked

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    async def send(self, request: httpx.Request, timeout: float | None) -> None:
        """The request line, headers and body (in as few writes as it takes), within
        ``timeout`` seconds whenever the socket pushes back."""
        try:
            parts = [self.h11.send(h11.Request(method=request.method,
                                               target=request.url.raw_path,
                                               headers=request.headers.raw))]
            size = 0
            async for chunk in request.stream:  # type: ignore[union-attr]
                parts.append(self.h11.send(h11.Data(data=chunk)))
                size += len(chunk)
                if size > WRITE_CHUNK:
                    self._write(parts, request)
                    parts, size = [], 0
                    await self._drain(request, timeout)
            parts.append(self.h11.send(h11.EndOfMessage()))
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc), request=request) from exc
        self._write(parts, request)
        await self._drain(request, timeout)

    async def receive_head(self, request: httpx.Request, timeout: float | None) -> (
        tuple[int, list[tuple[bytes, bytes]], bytes]
    ):
        """Status, headers and reason of the response (1xx answers skipped)."""
        while True:
            event = await self.next_event(request, timeout)
            if isinstance(event, h11.Response):
                return event.status_code, event.headers.raw_items(), event.reason
            if not isinstance(event, h11.InformationalResponse):
                raise httpx.RemoteProtocolError(f"unexpected {type(event).__name__} before "
                                                "the response", request=request)

    async def next_event(self, request: httpx.Request, timeout: float | None) -> Any:
        """h11's next event, feeding it what has arrived, waiting up to ``timeout`` for more."""
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc), request=request) from exc
            if event is not h11.NEED_DATA:
                if isinstance(event, h11.ConnectionClosed):
                    raise httpx.RemoteProtocolError(
                        "Server disconnected without sending a response.", request=request)
                return event
            await self._feed(request, timeout)

    async def _feed(self, request: httpx.Request, timeout: float | None) -> None:
        if not self._received and not self._eof:
            await self._wait(request, timeout)
        if self._received:
            data = b"".join(self._received) if len(self._received) > 1 else self._received[0]
            self._received.clear()
            self._buffered = 0
            if self._paused and self._transport is not None:
                self._paused = False
                self._transport.resume_reading()
            self._fed += len(data)
            self.h11.receive_data(data)
        elif self._eof:
            if self._lost is not None and not isinstance(self._lost, EOFError):
                raise httpx.ReadError(str(self._lost) or type(self._lost).__name__,
                                      request=request)
            if not self._fed:  # httpcore's words, which callers may know
                raise httpx.RemoteProtocolError(
                    "Server disconnected without sending a response.", request=request)
            self.h11.receive_data(b"")

    async def _wait(self, request: httpx.Request, timeout: float | None) -> None:
        self._wakeup = asyncio.get_running_loop().create_future()
        try:
            await _within(self._wakeup, timeout, lambda: httpx.ReadTimeout(
                f"nothing received within {timeout:g} s", request=request))
        finally:
            self._wakeup = None

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def _write(self, parts: Sequence[bytes | None], request: httpx.Request) -> None:
        if self._transport is None or self._transport.is_closing():
            raise httpx.WriteError(self._why_closed(), request=request)
        self._transport.write(b"".join(p for p in parts if p))

    async def _drain(self, request: httpx.Request, timeout: float | None) -> None:
        if self._can_write is None:
            return
        await _within(self._can_write, timeout, lambda: httpx.WriteTimeout(
            f"could not send within {timeout:g} s", request=request))
        if self._transport is None:
            raise httpx.WriteError(self._why_closed(), request=request)

    def _why_closed(self) -> str:
        return str(self._lost) if self._lost is not None else "the connection is closed"


async def _within(waited: asyncio.Future[None], timeout: float | None,
                  timed_out: Callable[[], httpx.TimeoutException]) -> None:
    """Await ``waited`` for at most ``timeout`` seconds; past it, raise ``timed_out()``
    (httpx's own timeout errors, so callers see what httpx's transport would raise)."""
    try:
        async with asyncio.timeout(timeout):
            await waited
    except TimeoutError:
        raise timed_out() from None


class _Body(httpx.AsyncByteStream):
    """A response body read from its connection; the connection goes back to the pool when
    the body was read to its end, and is closed otherwise."""

    def __init__(self, pool: LeanTransport, key: _Key, connection: _Connection,
                 request: httpx.Request, timeout: float | None) -> None:
        self._pool = pool
        self._key = key
        self._connection: _Connection | None = connection
        self._request = request
        self._timeout = timeout
        self._complete = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            raise httpx.StreamClosed()
        while True:
            event = await connection.next_event(self._request, self._timeout)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._complete = True
                return

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self._complete:
            self._pool._release(self._key, connection)
        else:
            self._pool._discard(connection)

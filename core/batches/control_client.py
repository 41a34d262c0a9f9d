"""``BatchClient``: the library client of a worker's control API (the TUI and CLI use it).

It talks HTTP over the batch's Unix socket with httpx, and refuses to talk to a socket
that is not ours (``sockpath.check_socket_is_ours``). Every failure is a ``BatchError``:
``WorkerUnreachable`` when nothing answers (the worker ended or died), ``ControlRejected``
for a 4xx, ``UntrustedSocket`` for someone else's socket, and a plain ``BatchError`` for an
answer that does not fit its declared shape (``core.batches.api``; the field is named).

``events()`` follows ``GET /events`` across worker restarts: when the stream breaks it
yields a ``disconnected`` event and keeps trying to reconnect for ``reconnect_s``; a worker
that comes back (``eagle-tui resume``) starts again with ``hello``. It ends cleanly after
the ``end`` event, or when the worker stays gone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from types import TracebackType
from typing import Self, TypeVar

import httpx
import msgspec

from eagle_tui.core.batches.api import (
    Disconnected,
    ErrorReply,
    NoFields,
    RecentSamples,
    Request,
    StateReply,
    StatusDoc,
    StopRequest,
    WatchReply,
    WatchRequest,
)
from eagle_tui.core.batches.events import DISCONNECTED, END, BatchEvent, SSEDecoder
from eagle_tui.core.batches.sockpath import check_socket_is_ours
from eagle_tui.core.errors import BatchError, ControlRejected, WorkerUnreachable
from eagle_tui.core.wire import ENCODER, explain

_BASE_URL = "http://eagle-batch"
EVENT_READ_TIMEOUT_S = 45.0  # the worker sends a keep-alive every 15 s
_JSON = {"content-type": "application/json"}

T = TypeVar("T", bound=msgspec.Struct)
_DECODERS: dict[type, msgspec.json.Decoder[msgspec.Struct]] = {
    shape: msgspec.json.Decoder(shape) for shape in (StatusDoc, StateReply, WatchReply,
                                                      RecentSamples)
}
_ERROR = msgspec.json.Decoder(ErrorReply)


class BatchClient:
    """Client of the control socket at ``socket_path``; use ``async with``."""

    def __init__(self, socket_path: str | Path, *, timeout_s: float = 5.0) -> None:
        self.socket_path = Path(socket_path)
        self._timeout_s = timeout_s
        self._http = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=str(self.socket_path)),
            base_url=_BASE_URL, timeout=timeout_s)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    # -- requests -------------------------------------------------------------------------

    async def status(self) -> StatusDoc:
        """The worker's status document (see ``core.batches.status``)."""
        return await self._call("GET", "/status", StatusDoc)

    async def recent(self) -> RecentSamples:
        """The newest finished rows of the batch (ids included), oldest first."""
        return await self._call("GET", "/recent", RecentSamples)

    async def pause(self) -> StateReply:
        """Hold new requests (in-flight ones finish)."""
        return await self._call("POST", "/pause", StateReply, NoFields())

    async def resume(self) -> StateReply:
        """Undo ``pause``."""
        return await self._call("POST", "/resume", StateReply, NoFields())

    async def stop(self, grace_s: float | None = None, *, abort: bool = False) -> StateReply:
        """Stop the batch: drain in-flight requests for ``grace_s`` (default: the batch's
        setting), then abort them; ``abort=True`` aborts at once."""
        return await self._call("POST", "/stop", StateReply,
                                StopRequest(grace_s=grace_s, abort=abort))

    async def watch(self, count: int) -> WatchReply:
        """Stream the next ``count`` requests; their token deltas arrive as ``delta`` events."""
        return await self._call("POST", "/watch", WatchReply, WatchRequest(count=count))

    async def _call(self, method: str, path: str, reply: type[T],
                    body: Request | None = None) -> T:
        self._check_socket()
        content = None if body is None else ENCODER.encode(body)
        try:
            response = await self._http.request(method, path, content=content,
                                                headers=_JSON if content is not None else None)
        except httpx.TransportError as e:
            raise self._unreachable(e) from e
        return _decode(response, f"{method} {path}", reply)

    # -- events ---------------------------------------------------------------------------

    async def events(self, *, reconnect_s: float = 10.0) -> AsyncGenerator[BatchEvent, None]:
        """The worker's events, across restarts (see the module docstring).

        Raises WorkerUnreachable only when the very first connection fails.
        """
        connected = False
        while True:
            try:
                async for event in self._stream_once():
                    connected = True
                    yield event
                    if event.type == END:
                        return
                reason = "the worker closed the event stream"
            except WorkerUnreachable as e:
                if not connected:
                    raise
                reason = str(e)
            yield BatchEvent(DISCONNECTED, Disconnected(reason=reason))
            if not await self._wait_back(reconnect_s):
                return

    async def _stream_once(self) -> AsyncIterator[BatchEvent]:
        self._check_socket()
        timeout = httpx.Timeout(self._timeout_s, read=EVENT_READ_TIMEOUT_S)
        decoder = SSEDecoder()
        try:
            async with self._http.stream("GET", "/events", timeout=timeout) as response:
                if response.status_code != 200:
                    await response.aread()
                    _refused(response, "GET /events")
                async for line in response.aiter_lines():
                    event = decoder.feed(line)
                    if event is not None:
                        yield event
        except httpx.TransportError as e:
            raise self._unreachable(e) from e

    async def _wait_back(self, within_s: float) -> bool:
        """True once the worker answers again within ``within_s``."""
        deadline = time.monotonic() + within_s
        delay = 0.05
        while time.monotonic() < deadline:
            try:
                await self.status()
                return True
            except WorkerUnreachable:
                pass
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 1.0)
        return False

    # -- helpers --------------------------------------------------------------------------

    def _check_socket(self) -> None:
        try:
            check_socket_is_ours(self.socket_path)
        except FileNotFoundError:
            raise WorkerUnreachable(
                f"no control socket at {self.socket_path}: the batch worker is not running "
                "(`eagle-tui batches` shows its state; `eagle-tui resume BATCH` restarts it)"
            ) from None

    def _unreachable(self, error: Exception) -> WorkerUnreachable:
        return WorkerUnreachable(
            f"the batch worker at {self.socket_path} did not answer ({type(error).__name__}: "
            f"{error}); it may have exited: `eagle-tui batches` shows its state")


def _decode(response: httpx.Response, what: str, reply: type[T]) -> T:
    """The answer as ``reply``; ControlRejected (4xx) or BatchError (5xx, or a body that
    does not fit ``reply``) otherwise."""
    _refused(response, what)
    try:
        decoded = _DECODERS[reply].decode(response.content)
    except msgspec.DecodeError as e:
        raise BatchError(
            f"{what}: the worker's answer does not fit ({explain(e)}); it may run another "
            "eagle-tui version: stop it and `eagle-tui resume` it with this one") from None
    assert isinstance(decoded, reply)
    return decoded


def _refused(response: httpx.Response, what: str) -> None:
    """Raise for a 4xx (ControlRejected) or 5xx (BatchError), with the worker's reason."""
    if response.status_code < 400:
        return
    try:
        error = _ERROR.decode(response.content).error
    except msgspec.DecodeError:
        error = response.text[:200] or response.reason_phrase
    if response.status_code < 500:
        raise ControlRejected(f"{what} refused: {error}", status=response.status_code)
    raise BatchError(f"{what} failed in the worker ({response.status_code}: {error}); "
                     "see the batch log")

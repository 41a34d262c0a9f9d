"""``BatchClient``: the library client of a worker's control API (the TUI and CLI use it).

It talks HTTP over the batch's Unix socket with httpx, and refuses to talk to a socket
that is not ours (``sockpath.check_socket_is_ours``). Every failure is a ``BatchError``:
``WorkerUnreachable`` when nothing answers (the worker ended or died), ``ControlRejected``
for a 4xx, ``UntrustedSocket`` for someone else's socket.

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
from typing import Any, Self

import httpx

from eagle_tui.core.batches.events import DISCONNECTED, END, BatchEvent, SSEDecoder
from eagle_tui.core.batches.sockpath import check_socket_is_ours
from eagle_tui.core.errors import BatchError, ControlRejected, WorkerUnreachable

_BASE_URL = "http://eagle-batch"
EVENT_READ_TIMEOUT_S = 45.0  # the worker sends a keep-alive every 15 s


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

    async def status(self) -> dict[str, Any]:
        """The worker's status document (see ``core.batches.status``)."""
        return await self._call("GET", "/status")

    async def pause(self) -> dict[str, Any]:
        """Hold new requests (in-flight ones finish); ``{"state": ...}``."""
        return await self._call("POST", "/pause")

    async def resume(self) -> dict[str, Any]:
        """Undo ``pause``."""
        return await self._call("POST", "/resume")

    async def stop(self, grace_s: float | None = None, *, abort: bool = False) -> dict[str, Any]:
        """Stop the batch: drain in-flight requests for ``grace_s`` (default: the batch's
        setting), then abort them; ``abort=True`` aborts at once."""
        body: dict[str, Any] = {"abort": abort}
        if grace_s is not None:
            body["grace_s"] = grace_s
        return await self._call("POST", "/stop", body)

    async def watch(self, count: int) -> dict[str, Any]:
        """Stream the next ``count`` requests; their token deltas arrive as ``delta`` events."""
        return await self._call("POST", "/watch", {"count": count})

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> (
        dict[str, Any]
    ):
        self._check_socket()
        try:
            response = await self._http.request(method, path, json=body)
        except httpx.TransportError as e:
            raise self._unreachable(e) from e
        return _decode(response, f"{method} {path}")

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
            yield BatchEvent(DISCONNECTED, {"reason": reason})
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
                    _decode(response, "GET /events")
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


def _decode(response: httpx.Response, what: str) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        data = {"error": response.text[:200]}
    if not isinstance(data, dict):
        data = {"value": data}
    if 400 <= response.status_code < 500:
        raise ControlRejected(f"{what} refused: {data.get('error', response.reason_phrase)}",
                              status=response.status_code)
    if response.status_code >= 500:
        raise BatchError(f"{what} failed in the worker ({response.status_code}: "
                         f"{data.get('error', '')}); see the batch log")
    return data

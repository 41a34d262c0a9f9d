"""Low-level connection tricks: closing a socket with no response, noticing a client leave.

``TransportCapture`` is the outermost ASGI layer: uvicorn hands it its own
``send`` bound method, whose owner holds the socket transport. Keeping that in
the scope lets a handler abort the connection outright, which is what a reset
fault (and a dying server) looks like to a client.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

TRANSPORT_KEY: Final = "sim.cycle"


class TransportCapture:
    """ASGI middleware: remembers uvicorn's request cycle in ``scope[TRANSPORT_KEY]``."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on with the cycle noted."""
        scope[TRANSPORT_KEY] = getattr(send, "__self__", None)
        await self._app(scope, receive, send)


class DroppedConnection(Response):
    """A "response" that closes the connection without sending a byte."""

    def __init__(self) -> None:
        super().__init__(status_code=599)  # never sent

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Abort the socket; tell uvicorn the client is gone so it stays quiet."""
        cycle: Any = scope.get(TRANSPORT_KEY)
        transport = getattr(cycle, "transport", None)
        if transport is not None:
            transport.abort()
            cycle.disconnected = True
        await asyncio.sleep(0)


async def wait_for_disconnect(request: Request) -> None:
    """Return once the client has closed the connection (the body must be read already)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return

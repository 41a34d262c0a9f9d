"""The control API of a batch worker as a Starlette app (served by ``control_server``).

    GET  /status   the status document (``core.batches.status``)
    GET  /events   server-sent events (``core.batches.events``)
    GET  /recent   the newest finished rows, ids included (a spot-check before any shard)
    POST /pause    {} -> {"state"}            hold new requests; in-flight ones finish
    POST /resume   {} -> {"state"}
    POST /stop     {"grace_s": float >= 0, "abort": bool} (both optional) -> 202 {"state"}
    POST /watch    {"count": 1..100000} -> {"requested", "started"}

Bodies and answers are the structs of ``core.batches.api``, decoded and encoded from those
declarations. Anything else is a 4xx with ``{"error": "..."}``: unknown path 404, wrong
method 405, a body that is not a small JSON object or has unknown or ill-typed fields 400
(the message names the field and says what it takes), a body over 16 KiB 413. Malformed
HTTP is answered 400 by the HTTP layer. No request can crash the worker: unexpected
exceptions become a logged 500.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Protocol, TypeVar

import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from eagle_tui.core.batches.api import (
    MAX_GRACE_S,
    MAX_WATCH,
    ErrorReply,
    Hello,
    NoFields,
    RecentSamples,
    StateReply,
    StopRequest,
    WatchReply,
    WatchRequest,
)
from eagle_tui.core.batches.api import Request as RequestBody
from eagle_tui.core.batches.events import HELLO, sse_frame
from eagle_tui.core.batches.hub import EventHub, HubFull, Subscriber
from eagle_tui.core.batches.status import StatusBuilder, WatchTally
from eagle_tui.core.batchstate import FINAL_STATES, BatchState, public_state
from eagle_tui.core.capture.progress import CaptureProgress
from eagle_tui.core.wire import ENCODER, explain

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * 1024
KEEPALIVE_S = 15.0
__all__ = ["KEEPALIVE_S", "MAX_BODY_BYTES", "MAX_GRACE_S", "MAX_WATCH", "ControlApi",
           "Controllable", "read_body"]

B = TypeVar("B", bound=RequestBody)
_DECODERS: dict[type[RequestBody], msgspec.json.Decoder[RequestBody]] = {
    shape: msgspec.json.Decoder(shape) for shape in (NoFields, StopRequest, WatchRequest)
}


class Controllable(Protocol):
    """What the control API drives: ``CaptureEngine``'s control surface."""

    def progress(self) -> CaptureProgress: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def watch(self, count: int) -> None: ...

    def stop(self, grace_s: float | None = None, *, abort: bool = False) -> None: ...


class ControlApi:
    """Request handlers bound to one worker's engine, status and event hub."""

    def __init__(self, engine: Controllable, status: StatusBuilder, hub: EventHub,
                 watch: WatchTally, hello: Callable[[], Hello],
                 *, keepalive_s: float = KEEPALIVE_S,
                 recent: Callable[[], RecentSamples] = RecentSamples) -> None:
        self._engine = engine
        self._status = status
        self._hub = hub
        self._watch = watch
        self._hello = hello
        self._keepalive_s = keepalive_s
        self._recent = recent

    def app(self) -> Starlette:
        """The ASGI app."""
        routes = [
            Route("/status", self.status, methods=["GET"]),
            Route("/events", self.events, methods=["GET"]),
            Route("/recent", self.recent, methods=["GET"]),
            Route("/pause", self.pause, methods=["POST"]),
            Route("/resume", self.resume, methods=["POST"]),
            Route("/stop", self.stop, methods=["POST"]),
            Route("/watch", self.watch, methods=["POST"]),
        ]
        handlers = {HTTPException: _http_error, Exception: _internal_error}
        return Starlette(routes=routes, exception_handlers=handlers)

    async def status(self, request: Request) -> Response:
        """GET /status."""
        return _json(await self._status.build())

    async def recent(self, request: Request) -> Response:
        """GET /recent."""
        return _json(self._recent())

    async def pause(self, request: Request) -> Response:
        """POST /pause."""
        await read_body(request, NoFields)
        self._engine.pause()
        return self._state()

    async def resume(self, request: Request) -> Response:
        """POST /resume."""
        await read_body(request, NoFields)
        self._engine.resume()
        return self._state()

    async def stop(self, request: Request) -> Response:
        """POST /stop."""
        body = await read_body(request, StopRequest)
        self._engine.stop(body.grace_s, abort=body.abort)
        state = public_state(self._engine.progress().state)
        if state not in FINAL_STATES:
            state = BatchState.STOPPING  # the engine's drain task starts on the next loop turn
        return _json(StateReply(state=state), status_code=202)

    async def watch(self, request: Request) -> Response:
        """POST /watch."""
        body = await read_body(request, WatchRequest)
        self._engine.watch(body.count)
        self._watch.requested += body.count
        return _json(WatchReply(requested=self._watch.requested, started=self._watch.started))

    async def events(self, request: Request) -> Response:
        """GET /events (server-sent events)."""
        try:
            subscriber = self._hub.subscribe()
        except HubFull as e:
            return _json(ErrorReply(error=f"{e}; close one and retry"), status_code=503)
        return StreamingResponse(self._stream(subscriber), media_type="text/event-stream",
                                 headers={"cache-control": "no-store"})

    async def _stream(self, subscriber: Subscriber) -> AsyncIterator[bytes]:
        seq = 1
        try:
            yield sse_frame(HELLO, seq, self._hello())
            while not subscriber.ended:
                frames = await subscriber.take(self._keepalive_s)
                if not frames:
                    yield b": keep-alive\n\n"
                    continue
                chunk = b"".join(sse_frame(kind, seq + i, data)
                                 for i, (kind, data) in enumerate(frames, start=1))
                seq += len(frames)
                yield chunk
        finally:
            self._hub.unsubscribe(subscriber)

    def _state(self) -> Response:
        return _json(StateReply(state=public_state(self._engine.progress().state)))


def _json(body: msgspec.Struct, *, status_code: int = 200,
          headers: Mapping[str, str] | None = None) -> Response:
    return Response(ENCODER.encode(body), status_code=status_code, headers=headers,
                    media_type="application/json")


async def read_body(request: Request, shape: type[B]) -> B:
    """The body decoded as ``shape`` ({} when empty); 400/413 HTTPException otherwise, the
    400 naming the field and what the request takes."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise HTTPException(413, f"body larger than {MAX_BODY_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise HTTPException(413, f"body larger than {MAX_BODY_BYTES} bytes")
    what = f"{request.method} {request.url.path}"
    try:
        decoded = _DECODERS[shape].decode(bytes(body) if body.strip() else b"{}")
    except msgspec.ValidationError as e:
        raise HTTPException(400, f"{what}: {explain(e)}; {shape.USAGE}") from None
    except msgspec.DecodeError:
        raise HTTPException(400, f"{what}: body is not JSON; send a JSON object") from None
    assert isinstance(decoded, shape)
    return decoded


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    return _json(ErrorReply(error=error.detail), status_code=error.status_code,
                 headers=error.headers)


async def _internal_error(request: Request, error: Exception) -> Response:
    log.exception("control request %s %s failed", request.method, request.url.path,
                  exc_info=error)
    return _json(ErrorReply(error=f"internal error: {type(error).__name__}; see the batch log"),
                 status_code=500)

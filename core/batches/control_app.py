"""The control API of a batch worker as a Starlette app (served by ``control_server``).

    GET  /status   the status document (``core.batches.status``)
    GET  /events   server-sent events (``core.batches.events``)
    POST /pause    {} -> {"state"}            hold new requests; in-flight ones finish
    POST /resume   {} -> {"state"}
    POST /stop     {"grace_s": float >= 0, "abort": bool} (both optional) -> 202 {"state"}
    POST /watch    {"count": 1..100000} -> {"requested", "started"}

Anything else is a 4xx with ``{"error": "..."}``: unknown path 404, wrong method 405, a
body that is not a small JSON object or has unknown or ill-typed fields 400, a body over
16 KiB 413. Malformed HTTP is answered 400 by the HTTP layer. No request can crash the
worker: unexpected exceptions become a logged 500.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from eagle_tui.core.batches.events import HELLO, public_state, sse_frame
from eagle_tui.core.batches.hub import EventHub, HubFull, Subscriber
from eagle_tui.core.batches.status import StatusBuilder, WatchTally
from eagle_tui.core.capture.progress import CaptureProgress

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * 1024
MAX_WATCH = 100_000
MAX_GRACE_S = 7 * 24 * 3600.0
KEEPALIVE_S = 15.0


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
                 watch: WatchTally, hello: Callable[[], dict[str, Any]],
                 *, keepalive_s: float = KEEPALIVE_S) -> None:
        self._engine = engine
        self._status = status
        self._hub = hub
        self._watch = watch
        self._hello = hello
        self._keepalive_s = keepalive_s

    def app(self) -> Starlette:
        """The ASGI app."""
        routes = [
            Route("/status", self.status, methods=["GET"]),
            Route("/events", self.events, methods=["GET"]),
            Route("/pause", self.pause, methods=["POST"]),
            Route("/resume", self.resume, methods=["POST"]),
            Route("/stop", self.stop, methods=["POST"]),
            Route("/watch", self.watch, methods=["POST"]),
        ]
        handlers = {HTTPException: _http_error, Exception: _internal_error}
        return Starlette(routes=routes, exception_handlers=handlers)

    async def status(self, request: Request) -> Response:
        """GET /status."""
        return JSONResponse(await self._status.build())

    async def pause(self, request: Request) -> Response:
        """POST /pause."""
        _no_fields(await read_json_object(request))
        self._engine.pause()
        return self._state()

    async def resume(self, request: Request) -> Response:
        """POST /resume."""
        _no_fields(await read_json_object(request))
        self._engine.resume()
        return self._state()

    async def stop(self, request: Request) -> Response:
        """POST /stop."""
        body = await read_json_object(request)
        _only(body, {"grace_s", "abort"})
        grace = body.get("grace_s")
        if grace is not None and not (_is_number(grace) and 0 <= grace <= MAX_GRACE_S):
            raise HTTPException(400, f"grace_s must be a number of seconds in [0, {MAX_GRACE_S:g}]")
        abort = body.get("abort", False)
        if not isinstance(abort, bool):
            raise HTTPException(400, "abort must be true or false")
        self._engine.stop(None if grace is None else float(grace), abort=abort)
        state = public_state(self._engine.progress().state)
        if state not in ("done", "stopped", "failed"):
            state = "stopping"  # the engine's drain task starts on the next loop turn
        return JSONResponse({"state": state}, status_code=202)

    async def watch(self, request: Request) -> Response:
        """POST /watch."""
        body = await read_json_object(request)
        _only(body, {"count"})
        count = body.get("count")
        if not (isinstance(count, int) and not isinstance(count, bool)
                and 1 <= count <= MAX_WATCH):
            raise HTTPException(400, f"count must be an integer in [1, {MAX_WATCH}]")
        self._engine.watch(count)
        self._watch.requested += count
        return JSONResponse({"requested": self._watch.requested, "started": self._watch.started})

    async def events(self, request: Request) -> Response:
        """GET /events (server-sent events)."""
        try:
            subscriber = self._hub.subscribe()
        except HubFull as e:
            return JSONResponse({"error": f"{e}; close one and retry"}, status_code=503)
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
        return JSONResponse({"state": public_state(self._engine.progress().state)})


async def read_json_object(request: Request) -> dict[str, Any]:
    """The body as a JSON object ({} when empty); 400/413 HTTPException otherwise."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise HTTPException(413, f"body larger than {MAX_BODY_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise HTTPException(413, f"body larger than {MAX_BODY_BYTES} bytes")
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise HTTPException(400, "body is not JSON; send a JSON object") from None
    if not isinstance(data, dict):
        raise HTTPException(400, "body must be a JSON object")
    return data


def _only(body: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise HTTPException(400, f"unknown field(s) {unknown}; allowed: {sorted(allowed)}")


def _no_fields(body: dict[str, Any]) -> None:
    _only(body, set())


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    return JSONResponse({"error": error.detail}, status_code=error.status_code,
                        headers=error.headers)


async def _internal_error(request: Request, error: Exception) -> Response:
    log.exception("control request %s %s failed", request.method, request.url.path,
                  exc_info=error)
    return JSONResponse({"error": f"internal error: {type(error).__name__}; see the batch log"},
                        status_code=500)

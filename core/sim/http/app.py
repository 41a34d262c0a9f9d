"""The Starlette application: SGLang's routes, CORS like SGLang, API-key gate, sim hooks."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Final

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from eagle_tui.core.sim.context import SimContext
from eagle_tui.core.sim.http import admin, info
from eagle_tui.core.sim.http.connection import TransportCapture
from eagle_tui.core.sim.http.generate import generate
from eagle_tui.core.sim.lifecycle.warmup import warm_up

# SGLang's API-key middleware lets these through without a key (probes and scrapers).
OPEN_PREFIXES: Final = ("/health", "/ready", "/metrics", "/sim/")


def build_app(ctx: SimContext) -> ASGIApp:
    """The ASGI app serving ``ctx``."""
    routes = [
        Route("/generate", generate, methods=["POST", "PUT"]),
        Route("/health", info.health),
        Route("/health_generate", info.health),
        Route("/ready", info.ready),
        Route("/ping", info.ready),
        Route("/model_info", info.get_model_info),
        Route("/get_model_info", info.get_model_info),
        Route("/server_info", info.get_server_info),
        Route("/get_server_info", info.get_server_info),
        Route("/v1/models", info.list_models),
        Route("/flush_cache", info.flush_cache, methods=["GET", "POST"]),
        Route("/freeze_gc", info.freeze_gc, methods=["GET", "POST"]),
        Route("/abort_request", admin.abort_request, methods=["POST", "PUT"]),
        Route("/sim/faults", admin.sim_faults, methods=["GET", "POST"]),
        Route("/sim/crash", admin.sim_crash, methods=["POST"]),
        Route("/sim/state", admin.sim_state),
    ]
    if ctx.config.enable_metrics:
        routes.append(Route("/metrics", info.metrics))

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        ctx.spawn(ctx.run_scheduler())
        ctx.spawn(warm_up(ctx))
        yield

    app = Starlette(
        routes=routes,
        middleware=[Middleware(CORSMiddleware, allow_origins=["*"], allow_credentials=True,
                               allow_methods=["*"], allow_headers=["*"])],
        exception_handlers={HTTPException: _http_error},
        lifespan=lifespan,
    )
    app.state.sim = ctx
    gated: ASGIApp = ApiKeyGate(app, ctx.config.api_key) if ctx.config.api_key else app
    return TransportCapture(gated)


class ApiKeyGate:
    """``--api-key``: 401 ``{"error":"Unauthorized"}`` without ``Authorization: Bearer KEY``."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self._app = app
        self._expected = f"Bearer {api_key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the key, then pass the request on."""
        if scope["type"] == "http" and not self._allowed(scope):
            response = JSONResponse({"error": "Unauthorized"}, status_code=401)
            await response(scope, receive, send)
            return
        await self._app(scope, receive, send)

    def _allowed(self, scope: Scope) -> bool:
        if scope["method"] == "OPTIONS" or str(scope["path"]).startswith(OPEN_PREFIXES):
            return True
        headers = dict(scope["headers"])
        return headers.get(b"authorization") == self._expected


async def _http_error(request: Request, exc: Exception) -> Response:
    # FastAPI's default for routing errors: {"detail": "Not Found"} as JSON.
    assert isinstance(exc, HTTPException)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)

"""Health, info and cache routes: ``/health``, ``/model_info``, ``/server_info``, ``/v1/models``…

Bodies and status codes follow the recording: health answers carry an empty
body (503 while starting or draining), info routes answer 200 as soon as the
port is bound, the deprecated ``/get_*`` aliases log SGLang's warning.
"""

from __future__ import annotations

import asyncio
from typing import Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from eagle_tui.core.sim.context import sim_context
from eagle_tui.core.sim.http.metrics import CONTENT_TYPE, render_metrics
from eagle_tui.core.sim.server_info import model_info, models_list, server_info

HEALTH_CHECK_TIMEOUT: Final = 20.0  # SGLANG_HEALTH_CHECK_TIMEOUT: a dead scheduler never answers
FLUSH_TEXT: Final = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or "
    "waiting requests, the operation will not be performed.)\n"
)


async def health(request: Request) -> Response:
    """``/health`` and ``/health_generate``."""
    ctx = sim_context(request)
    if ctx.state.gracefully_exit:
        ctx.log.main("Health check request received during shutdown. Returning 503.")
        return Response(status_code=503)
    if not ctx.state.ready:
        return Response(status_code=503)
    if ctx.state.crashed:  # the probe generation never comes back
        await asyncio.sleep(HEALTH_CHECK_TIMEOUT)
        return Response(status_code=503)
    await asyncio.sleep(ctx.config.health_latency)
    return Response(status_code=200)


async def ready(request: Request) -> Response:
    """``/ready`` and ``/ping``: 200 once warmed up and not draining."""
    state = sim_context(request).state
    return Response(status_code=200 if state.ready and not state.gracefully_exit else 503)


async def get_model_info(request: Request) -> Response:
    """``/model_info`` (and the deprecated ``/get_model_info``)."""
    ctx = sim_context(request)
    _warn_if_deprecated(request, "/get_model_info", "/model_info")
    return JSONResponse(model_info(ctx.config, ctx.model_dir))


async def get_server_info(request: Request) -> Response:
    """``/server_info`` (and the deprecated ``/get_server_info``)."""
    ctx = sim_context(request)
    _warn_if_deprecated(request, "/get_server_info", "/server_info")
    return JSONResponse(server_info(
        ctx.config, ctx.capacity, ready=ctx.state.ready,
        startup_seconds=ctx.state.phase_seconds, gen_throughput=ctx.stats.gen_throughput,
        avg_spec_accept_length=ctx.scheduler.spec_log.lifetime,
    ))


async def list_models(request: Request) -> Response:
    """``/v1/models``."""
    ctx = sim_context(request)
    return JSONResponse(models_list(ctx.config, ctx.capacity))


async def flush_cache(request: Request) -> Response:
    """``/flush_cache``: refused (400, same text) while requests run or wait."""
    ctx = sim_context(request)
    running, queued = ctx.scheduler.running_count, ctx.scheduler.queued_count
    if running or queued:
        ctx.log.rank(0, "Cache not flushed because there are pending requests. "
                        f"#queue-req: {queued}, #running-req: {running}")
        return Response(FLUSH_TEXT, status_code=400)
    ctx.cache.clear()
    ctx.scheduler.spec_log.flush()
    ctx.log.rank(0, "Cache flushed successfully!")
    return Response(FLUSH_TEXT, status_code=200)


async def freeze_gc(request: Request) -> Response:
    """``/freeze_gc``: the warm-up calls it; nothing to freeze here."""
    return Response(status_code=200)


async def metrics(request: Request) -> Response:
    """``/metrics`` (routed only with ``--enable-metrics``)."""
    return Response(render_metrics(sim_context(request)), media_type=CONTENT_TYPE)


def _warn_if_deprecated(request: Request, old: str, new: str) -> None:
    if request.url.path == old:
        sim_context(request).log.main(
            f"Endpoint '{old}' is deprecated and will be removed in a future version. "
            f"Please use '{new}' instead."
        )

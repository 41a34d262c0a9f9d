"""``/abort_request`` (SGLang's) and the sim's own test hooks under ``/sim/``.

``/sim/faults`` changes fault rates at run time, ``/sim/crash`` kills the
server the way a GPU fault does, ``/sim/state`` reports phase and load. These
are not SGLang routes; nothing but tests and demos should call them.
"""

from __future__ import annotations

import json
import os
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from eagle_tui.core.sim.context import sim_context
from eagle_tui.core.sim.http.connection import DroppedConnection


async def abort_request(request: Request) -> Response:
    """``{"rid": …}`` or ``{"abort_all": true}``; always 200 with an empty body.

    As in SGLang 0.5.23: the tokenizer manager forwards an abort only when that exact
    rid is in flight (anything else is dropped silently); the scheduler then aborts
    every request whose rid *starts with* it, so ``cap-1`` also takes ``cap-10``.
    """
    ctx = sim_context(request)
    body = await _json_object(request)
    rid = body.get("rid")
    if body.get("abort_all") is True:
        ctx.scheduler.abort("", abort_all=True)
    elif isinstance(rid, str) and rid in ctx.state.in_flight:
        ctx.scheduler.abort(rid)
    return Response(status_code=200)


async def sim_faults(request: Request) -> Response:
    """GET: the fault settings; POST: change them (rates, ``crash_after_requests``)."""
    ctx = sim_context(request)
    if request.method == "POST":
        try:
            ctx.faults.update(await _json_object(request))
        except ValueError as e:
            return JSONResponse({"error": str(e)}, status_code=400)
    return JSONResponse(ctx.faults.snapshot())


async def sim_crash(request: Request) -> Response:
    """Crash now: a scheduler exception, then the whole process is killed."""
    sim_context(request).crash_on_gpu_fault(pause=0.0)
    return DroppedConnection()


async def sim_state(request: Request) -> Response:
    """Phase, load and counters."""
    ctx = sim_context(request)
    return JSONResponse({
        "phase": ctx.state.reported_phase,
        "ready": ctx.state.ready,
        "draining": ctx.state.gracefully_exit,
        "running": ctx.scheduler.running_count,
        "queued": ctx.scheduler.queued_count,
        "in_flight": len(ctx.state.in_flight),
        "requests_served": ctx.state.served,
        "generation_tokens": ctx.stats.generation_tokens,
        "faults": ctx.faults.snapshot(),
        "pid": os.getpid(),
    })


async def _json_object(request: Request) -> dict[str, Any]:
    try:
        data = json.loads(await request.body() or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}

"""``POST /generate``: validation layers, faults, scheduling and the answer.

Order of events, as in SGLang 0.5.23: pydantic-style body parsing, the JSON
contract gate, the tokenizer manager's checks (in-band for streams), then the
scheduler. A non-streaming answer is one JSON object (a list for a batch); a
scheduler abort with a status becomes that HTTP error; an abort without one
(``/abort_request``, disconnect) is a normal 200 with the partial output.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from eagle_tui.core.sim.context import SimContext, sim_context
from eagle_tui.core.sim.engine.faults import Fault
from eagle_tui.core.sim.http.connection import DroppedConnection, wait_for_disconnect
from eagle_tui.core.sim.http.payload import ChunkView, response_object
from eagle_tui.core.sim.http.sse import DONE, sse_event, stream_events
from eagle_tui.core.sim.request import SimRequest, abort_finish
from eagle_tui.core.sim.validation.body_gate import parse_body
from eagle_tui.core.sim.validation.contract import check_contract
from eagle_tui.core.sim.validation.normalize import GenerateCall, normalize
from eagle_tui.core.sim.validation.rejections import BodyRejected, ContractRejected, InputRejected

SSE_MEDIA_TYPE = "text/event-stream"
_ERROR_MESSAGES = {503: "The request queue is full.",
                   500: "Internal server error: the scheduler failed to process the request."}


async def generate(request: Request) -> Response:
    """The ``/generate`` route (POST and PUT)."""
    ctx = sim_context(request)
    counted = ctx.state.ready  # the warm-up request and faults only count once ready
    try:
        body = parse_body(await request.body())
        check_contract(body)
    except (BodyRejected, ContractRejected) as e:
        return _answered(ctx, counted, JSONResponse(e.body(), status_code=400))
    try:
        call = normalize(body, model=ctx.model_dir, context_length=ctx.capacity.context_len,
                         in_flight=ctx.state.in_flight)
    except InputRejected as e:
        ctx.log.main(f"[http_server] Error: {e}")
        if _wants_stream(body):
            events = (sse_event(e.stream_body()), DONE)
            stream = StreamingResponse(iter(events), media_type=SSE_MEDIA_TYPE)
            return _answered(ctx, counted, stream)
        return _answered(ctx, counted, JSONResponse(e.body(), status_code=400))
    # Faults strike requests that passed validation, so a request SGLang refuses (too long,
    # bad ids) always gets its 400 first time: which rows fault must not decide which
    # rows fail permanently, or fault tests depend on arrival order.
    fault = ctx.faults.pick() if counted else None
    if fault == "reset":
        return DroppedConnection()
    if fault == "garbage":
        return _answered(ctx, counted, Response(ctx.faults.garbage(), 200,
                                                media_type="application/json"))
    return await _run(ctx, request, call, fault, counted)


async def _run(ctx: SimContext, http: Request, call: GenerateCall, fault: Fault | None,
               counted: bool) -> Response:
    notify = asyncio.Event()
    stop_ids = frozenset(ctx.model_dir.eos_ids)
    requests = [SimRequest(item, notify, stop_ids | item.sampling.stop_token_ids,
                           streaming=call.stream) for item in call.items]
    for sim_request in requests:
        ctx.state.in_flight[sim_request.rid] = sim_request
    if fault == "error":
        status = ctx.faults.error_status()
        for sim_request in requests:
            sim_request.finish_with(abort_finish(_ERROR_MESSAGES[status], status))
    else:
        for sim_request in requests:
            ctx.scheduler.submit(sim_request)
    if call.stream:
        return _stream(ctx, requests, notify, call, counted)
    return await _answer(ctx, http, requests, notify, call, counted)


def _stream(ctx: SimContext, requests: list[SimRequest], notify: asyncio.Event,
            call: GenerateCall, counted: bool) -> Response:
    def on_close(completed: bool) -> None:
        _release(ctx, requests, aborted=not completed)
        if completed:
            ctx.spawn(_count(ctx, counted))

    events = stream_events(ctx.model_dir, requests, notify,
                           incremental=ctx.config.incremental_streaming_output,
                           is_batch=call.is_batch, on_close=on_close)
    return StreamingResponse(events, media_type=SSE_MEDIA_TYPE)


async def _answer(ctx: SimContext, http: Request, requests: list[SimRequest],
                  notify: asyncio.Event, call: GenerateCall, counted: bool) -> Response:
    if not await _finished_or_gone(http, requests, notify):
        _release(ctx, requests, aborted=True)
        return DroppedConnection()
    _release(ctx, requests, aborted=False)
    failed = next((r for r in requests if (r.finish or {}).get("status_code")), None)
    if failed is not None:
        return _answered(ctx, counted, _abort_error(failed))
    bodies = [response_object(ctx.model_dir, r, ChunkView(),
                              prompt_token_ids=call.return_prompt_token_ids) for r in requests]
    content: Any = bodies if call.is_batch else bodies[0]
    return _answered(ctx, counted, JSONResponse(content))


async def _finished_or_gone(http: Request, requests: list[SimRequest],
                            notify: asyncio.Event) -> bool:
    """Wait for every request to finish; False if the client disconnected first."""
    if all(r.finished for r in requests):
        return True
    gone = asyncio.ensure_future(wait_for_disconnect(http))
    try:
        while True:
            notify.clear()
            if all(r.finished for r in requests):
                return True
            woken = asyncio.ensure_future(notify.wait())
            await asyncio.wait({woken, gone}, return_when=asyncio.FIRST_COMPLETED)
            woken.cancel()
            if gone.done():
                return all(r.finished for r in requests)
    finally:
        gone.cancel()


def _abort_error(request: SimRequest) -> Response:
    finish = request.finish or {}
    status = int(finish["status_code"])
    message = str(finish.get("message"))
    if status == 400:
        return JSONResponse({"error": {"message": message}}, status_code=400)
    return JSONResponse({"object": "error", "message": message, "type": str(status),
                         "param": None, "code": status}, status_code=status)


def _release(ctx: SimContext, requests: list[SimRequest], *, aborted: bool) -> None:
    for sim_request in requests:
        if aborted and not sim_request.finished:
            ctx.scheduler.cancel(sim_request)
        if ctx.state.in_flight.get(sim_request.rid) is sim_request:
            del ctx.state.in_flight[sim_request.rid]


def _answered(ctx: SimContext, counted: bool, response: Response) -> Response:
    """Count ``response`` toward ``--crash-after-requests`` once it has been sent."""
    if counted:
        response.background = BackgroundTask(_count, ctx, counted)
    return response


async def _count(ctx: SimContext, counted: bool) -> None:
    # async on purpose: Starlette runs a sync background function in a worker thread
    if not counted:
        return
    ctx.state.served += 1
    if ctx.faults.count_answer():
        ctx.crash_on_gpu_fault()


def _wants_stream(body: dict[str, Any]) -> bool:
    value = body.get("stream")
    return bool(value) and value not in ("false", "f", "no", "n", "off", "0")

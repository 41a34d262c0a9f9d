"""Server-sent events for ``"stream": true``, framed exactly as SGLang frames them.

Each event is ``data: <compact JSON>\\n\\n`` and the stream ends with
``data: [DONE]\\n\\n``; no ``event:``/``id:`` lines, no keep-alives. Chunks are
cumulative by default (full text and ids so far) or deltas with
``--incremental-streaming-output``. A slow reader skips intermediate snapshots
(cumulative) or gets the pending deltas joined in one chunk (incremental),
because a chunk is built from the request's state when the reader is ready.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Final

from eagle_tui.core.sim.http.payload import ChunkView, response_object
from eagle_tui.core.sim.model.detok import output_text
from eagle_tui.core.sim.model.modeldir import ModelDir
from eagle_tui.core.sim.request import SimRequest

DONE: Final = b"data: [DONE]\n\n"


def sse_event(obj: Any) -> bytes:
    """One ``data:`` event with compact JSON, like orjson writes it."""
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


@dataclass
class _Cursor:
    sent_ids: int = 0
    sent_text: int = 0
    first: bool = True
    done: bool = False


async def stream_events(model: ModelDir, requests: list[SimRequest], notify: asyncio.Event, *,
                        incremental: bool, is_batch: bool,
                        on_close: Callable[[bool], None]) -> AsyncIterator[bytes]:
    """The events of one streaming ``/generate`` call; ``on_close(completed)`` runs last."""
    cursors = [_Cursor() for _ in requests]
    completed = False
    try:
        while True:
            notify.clear()  # before reading state: a step during a yield re-sets it
            for index, (request, cursor) in enumerate(zip(requests, cursors, strict=True)):
                chunk = _next_chunk(model, request, cursor, incremental)
                if chunk is not None:
                    if is_batch:
                        chunk["index"] = index
                    yield sse_event(chunk)
            if all(cursor.done for cursor in cursors):
                break
            await notify.wait()
        yield DONE
        completed = True
    finally:
        on_close(completed)


def _next_chunk(model: ModelDir, request: SimRequest, cursor: _Cursor,
                incremental: bool) -> dict[str, Any] | None:
    if cursor.done:
        return None
    produced = len(request.output_ids)
    final = request.finished
    if not final and produced <= cursor.sent_ids:
        return None
    view = ChunkView(start=cursor.sent_ids if incremental else 0,
                     text_start=cursor.sent_text if incremental else 0,
                     first=cursor.first, final=final)
    chunk = response_object(model, request, view)
    cursor.sent_ids = produced
    cursor.sent_text = len(output_text(model, request, None if final else produced))
    cursor.first = False
    cursor.done = final
    return chunk

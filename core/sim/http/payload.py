"""``/generate`` response objects with SGLang 0.5.23's keys in its order.

Non-streaming (recorded)::

    {"text","output_ids","meta_info":{"id","finish_reason","prompt_tokens","weight_version",
     "num_retractions",[logprobs…],"reasoning_tokens","completion_tokens","cached_tokens",
     "weight_versions","cached_tokens_details","dp_rank","e2e_latency",
     [spec_accept_rate, spec_accept_length, spec_num_correct_drafts, spec_num_proposed_drafts,
     spec_verify_ct, spec_correct_drafts_histogram: a finished answer with a verify step],
     "response_sent_to_client_ts"}}

Stream chunks drop ``weight_versions`` and ``e2e_latency`` until the last chunk,
and carry ``response_sent_to_client_ts`` on the first chunk only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from eagle_tui.core.sim.engine.speculation import meta_fields
from eagle_tui.core.sim.model.detok import output_text
from eagle_tui.core.sim.model.logprobs import logprob_fields
from eagle_tui.core.sim.model.modeldir import ModelDir
from eagle_tui.core.sim.request import SimRequest


@dataclass(frozen=True)
class ChunkView:
    """Which slice of a request's output one response object shows."""

    start: int = 0  # first output id shown (> 0 only for incremental stream chunks)
    text_start: int = 0  # characters of text already sent (incremental chunks)
    first: bool = True  # carries response_sent_to_client_ts
    final: bool = True  # carries the finish reason, weight_versions and e2e_latency


def response_object(model: ModelDir, request: SimRequest, view: ChunkView,
                    *, index: int | None = None,
                    prompt_token_ids: bool = False) -> dict[str, Any]:
    """One response object (a whole answer, or one stream chunk)."""
    upto = len(request.output_ids)
    text = output_text(model, request, None if view.final else upto)
    body: dict[str, Any] = {
        "text": text[view.text_start :],
        "output_ids": request.output_ids[view.start : upto],
        "meta_info": meta_info(model, request, view, upto),
    }
    if index is not None:
        body["index"] = index
    if prompt_token_ids:
        body["prompt_token_ids"] = request.item.input_ids
    return body


def meta_info(model: ModelDir, request: SimRequest, view: ChunkView, upto: int) -> dict[str, Any]:
    """``meta_info`` of ``request`` with ``upto`` output ids produced."""
    cached = request.cached_tokens
    meta: dict[str, Any] = {
        "id": request.rid,
        "finish_reason": request.finish if view.final else None,
        "prompt_tokens": len(request.item.input_ids),
        "weight_version": "default",
        "num_retractions": 0,
    }
    if request.item.logprobs.enabled:
        meta.update(logprob_fields(model, request, view.start, upto))
    meta["reasoning_tokens"] = 0
    meta["completion_tokens"] = upto
    meta["cached_tokens"] = cached
    if view.final:
        meta["weight_versions"] = [{"version": "default", "start": 0, "end": upto}]
    meta["cached_tokens_details"] = {"device": cached, "host": 0} if cached else None
    meta["dp_rank"] = None
    if view.final:
        meta["e2e_latency"] = request.e2e_latency
        if request.spec is not None and request.finished:
            meta.update(meta_fields(request.spec, upto))
    if view.first:
        meta["response_sent_to_client_ts"] = time.time()
    return meta

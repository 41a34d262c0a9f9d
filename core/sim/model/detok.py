"""Output text of a request, decoded incrementally like SGLang's detokenizer.

Streaming re-reads the text after every token, so decoded text is cached per
request and only new ids are decoded. Splitting a decode is exact for whole
UTF-8 characters; when a piece ends inside one (``\\ufffd``), the cache is not
advanced and the next call decodes from the same point again.
The stop token is dropped from the text unless ``no_stop_trim``; a stop string
cuts the text before it (after it with ``no_stop_trim``), as SGLang does.
"""

from __future__ import annotations

from eagle_tui.core.sim.model.modeldir import ModelDir
from eagle_tui.core.sim.request import SimRequest


def output_text(model: ModelDir, request: SimRequest, upto: int | None = None) -> str:
    """The ``text`` field for ``output_ids[:upto]``: final trimming applies once finished."""
    count = len(request.output_ids) if upto is None else upto
    finish = request.finish
    complete = upto is None or upto == len(request.output_ids)
    if finish is not None and complete and finish.get("type") == "stop":
        if isinstance(finish.get("matched"), str) and request.stop_text_end is not None:
            return _decoded(model, request, count)[: request.stop_text_end]
        if not request.item.sampling.no_stop_trim:
            count -= 1
    return _decoded(model, request, count)


def _decoded(model: ModelDir, request: SimRequest, count: int) -> str:
    skip = request.item.sampling.skip_special_tokens
    if count < request.text_cache_upto:
        return model.decode(request.output_ids[:count], skip)
    piece = model.decode(request.output_ids[request.text_cache_upto : count], skip)
    if "\ufffd" in piece:  # a split character: decode from scratch, leave the cache alone
        return model.decode(request.output_ids[:count], skip)
    request.text_cache += piece
    request.text_cache_upto = count
    return request.text_cache

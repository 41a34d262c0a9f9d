"""Reading SGLang's SSE ``/generate`` stream in either output mode.

SGLang 0.5.15+ streams cumulative ``output_ids`` by default and deltas with
``--incremental-streaming-output``; 0.5.4 always sent deltas. A client that
guesses wrong stacks prefixes or loses tokens (dynamo PR #7642), so the mode is
detected from the data: ``meta_info.completion_tokens`` counts every output id
so far in both modes, so a chunk is cumulative when it carries that many ids
and a delta when it carries the difference. The first chunk cannot tell them
apart and does not need to: both read it the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from eagle_tui.core.errors import ProtocolError, StreamError
from eagle_tui.core.sglang.types import FinishReason, GenerateResult, TokenDelta
from eagle_tui.core.sglang.wire import (
    NO_OUTPUT_IDS,
    StreamChunk,
    decode_chunk,
    decode_meta,
    make_result,
)

StreamMode = Literal["unknown", "cumulative", "incremental"]

DONE = "[DONE]"


def sse_payload(line: str) -> str | None:
    """The data of one SSE line, or None for blank lines, comments and other fields."""
    if not line.startswith("data:"):
        return None
    return line[5:].strip()


class StreamAccumulator:
    """Folds stream chunks into the full output, emitting only what is new each time."""

    def __init__(self, *, url: str) -> None:
        self.url = url
        self.mode: StreamMode = "unknown"
        self.output_ids: list[int] = []
        self.last_chunk: StreamChunk | None = None
        self.finish: FinishReason | None = None

    def feed(self, payload: bytes | str) -> TokenDelta:
        """Take one chunk's JSON text; return the ids it adds. Raises on in-band errors."""
        chunk = decode_chunk(payload, url=self.url)
        if chunk.error is not msgspec.UNSET:
            raise _stream_error(chunk.error, url=self.url)
        if not chunk.meta_info:
            raise ProtocolError("stream chunk has no meta_info", url=self.url)
        if chunk.output_ids is None:
            raise ProtocolError(NO_OUTPUT_IDS, url=self.url)
        meta = decode_meta(chunk.meta_info, url=self.url)
        new_ids = self._new_ids(chunk.output_ids, meta.completion_tokens)
        self.output_ids.extend(new_ids)
        self.last_chunk = chunk
        self.finish = meta.finish_reason
        return TokenDelta(
            rid=meta.id,
            new_ids=new_ids,
            total=len(self.output_ids),
            finish=self.finish,
        )

    def result(self, *, latency_s: float) -> GenerateResult:
        """The finished generation: all ids so far, the last chunk's meta_info and text."""
        chunk = self.last_chunk
        if chunk is None:
            raise ProtocolError("stream carried no chunks before [DONE]", url=self.url)
        meta = decode_meta(chunk.meta_info, url=self.url)
        return make_result(tuple(self.output_ids), meta, chunk.meta_info, chunk.text,
                           url=self.url, latency_s=latency_s)

    def _new_ids(self, ids: tuple[int, ...], completion_tokens: int | None) -> tuple[int, ...]:
        have = len(self.output_ids)
        if self.mode == "unknown" and have:
            self.mode = self._detect(ids, completion_tokens)
        if self.mode == "cumulative" or (self.mode == "unknown" and not have):
            return self._cumulative_tail(ids, have)
        return ids

    def _detect(self, ids: tuple[int, ...], completion_tokens: int | None) -> StreamMode:
        have = len(self.output_ids)
        if completion_tokens is not None:
            if len(ids) == completion_tokens and len(ids) >= have:
                return "cumulative"
            if have + len(ids) == completion_tokens:
                return "incremental"
        # No usable count: a chunk that repeats everything so far is cumulative.
        prefix_repeated = len(ids) >= have and list(ids[:have]) == self.output_ids
        return "cumulative" if prefix_repeated else "incremental"

    def _cumulative_tail(self, ids: tuple[int, ...], have: int) -> tuple[int, ...]:
        if len(ids) < have or list(ids[:have]) != self.output_ids:
            raise ProtocolError(
                f"cumulative stream went back: {have} ids so far, chunk has {len(ids)} "
                "that do not extend them",
                url=self.url,
            )
        return ids[have:]


def _stream_error(error: Any, *, url: str) -> StreamError:
    if isinstance(error, Mapping):
        status = error.get("code")
        return StreamError(
            f"in-stream error: {error.get('message', error)}",
            url=url,
            status=status if type(status) is int else None,
            retryable=bool(error.get("retryable", False)),
        )
    return StreamError(f"in-stream error: {error}", url=url)

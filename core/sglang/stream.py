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

from eagle_tui.core.errors import ProtocolError, StreamError
from eagle_tui.core.sglang.types import FinishReason, TokenDelta
from eagle_tui.core.sglang.wire import parse_finish_reason, parse_output_ids

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
        self.last_chunk: Mapping[str, Any] | None = None
        self.finish: FinishReason | None = None

    def feed(self, chunk: Any) -> TokenDelta:
        """Take one decoded JSON chunk; return the ids it adds. Raises on in-band errors."""
        if not isinstance(chunk, Mapping):
            raise ProtocolError(f"stream chunk is not an object: {chunk!r:.80}", url=self.url)
        if "error" in chunk:
            raise _stream_error(chunk["error"], url=self.url)
        meta = chunk.get("meta_info")
        if not isinstance(meta, Mapping):
            raise ProtocolError("stream chunk has no meta_info", url=self.url)
        ids = parse_output_ids(chunk, url=self.url)
        new_ids = self._new_ids(ids, meta.get("completion_tokens"))
        self.output_ids.extend(new_ids)
        self.last_chunk = chunk
        self.finish = parse_finish_reason(meta.get("finish_reason"), url=self.url)
        return TokenDelta(
            rid=str(meta.get("id", "")),
            new_ids=new_ids,
            total=len(self.output_ids),
            finish=self.finish,
        )

    def _new_ids(self, ids: tuple[int, ...], completion_tokens: Any) -> tuple[int, ...]:
        have = len(self.output_ids)
        if self.mode == "unknown" and have:
            self.mode = self._detect(ids, completion_tokens)
        if self.mode == "cumulative" or (self.mode == "unknown" and not have):
            return self._cumulative_tail(ids, have)
        return ids

    def _detect(self, ids: tuple[int, ...], completion_tokens: Any) -> StreamMode:
        have = len(self.output_ids)
        if type(completion_tokens) is int:
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

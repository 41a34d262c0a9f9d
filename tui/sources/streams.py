"""Live token streams of watched requests, folded into display documents off the UI thread.

``StreamBoard.apply(events)`` takes the capture events of watched requests (``sent``,
``delta``, ``retry``, ``finished``, ``failed``), segments each request's output
incrementally (``core.segments.Segmenter``), decodes only the segments that changed, and
returns immutable ``StreamView`` snapshots of the streams that changed. It is called from
one worker thread a few times a second, so the UI gets one update per flush, never one per
token. Capture events carry no prompt ids, so a stream is the output only, taken to start
inside reasoning (the Kimi thinking template ends the prompt with the think token).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from eagle_tui.core.capture.events import CaptureEvent
from eagle_tui.core.segments import Segment, Segmenter
from eagle_tui.core.tokenizer import BoundaryIds
from eagle_tui.tui.render.tokens import Piece, TokenDocument, kimi_token_text, make_piece
from eagle_tui.tui.sources.tokenizers import SharedTokenizer

StreamState = Literal["waiting", "streaming", "retrying", "finished", "failed"]
KEEP_STREAMS = 8
TAIL_IDS = 800


@dataclass(frozen=True)
class StreamView:
    """One watched request now: ids so far, state, and the document of its newest ids."""

    sample_id: str
    rid: str | None
    endpoint: str | None
    state: StreamState
    total_ids: int
    document: TokenDocument
    flags: tuple[str, ...] = ()
    detail: str = ""


class _Stream:
    """Mutable per-request state (owned by the board's thread)."""

    def __init__(self, sample_id: str, boundary: BoundaryIds) -> None:
        self.sample_id = sample_id
        self.rid: str | None = None
        self.endpoint: str | None = None
        self.state: StreamState = "waiting"
        self.flags: tuple[str, ...] = ()
        self.detail = ""
        self.ids: list[int] = []
        self.segmenter = Segmenter(boundary, prompt_len=0, reasoning_open=True)
        self.pieces: list[Piece | None] = []


class StreamBoard:
    """The newest ``keep`` watched requests of one batch."""

    def __init__(
        self,
        boundary: BoundaryIds,
        tokenizer: SharedTokenizer | None = None,
        *,
        keep: int = KEEP_STREAMS,
        tail_ids: int = TAIL_IDS,
    ) -> None:
        self.boundary = boundary
        self.tokenizer = tokenizer
        self.keep = keep
        self.tail_ids = tail_ids
        self._streams: OrderedDict[str, _Stream] = OrderedDict()

    def views(self) -> tuple[StreamView, ...]:
        """Every kept stream, oldest first."""
        return tuple(self._view(stream) for stream in self._streams.values())

    def apply(self, events: Iterable[CaptureEvent]) -> tuple[StreamView, ...]:
        """Fold ``events`` in; the views of the streams that changed (oldest first)."""
        changed: dict[str, _Stream] = {}
        for event in events:
            stream = self._stream(event.sample_id)
            self._fold(stream, event)
            changed[stream.sample_id] = stream
        for stream in changed.values():
            self._redecode_changed(stream)
        return tuple(self._view(s) for s in changed.values() if s.sample_id in self._streams)

    def use_tokenizer(self, tokenizer: SharedTokenizer, boundary: BoundaryIds) -> None:
        """Decode with ``tokenizer`` from now on (every kept stream is decoded again)."""
        self.tokenizer, self.boundary = tokenizer, boundary
        for stream in self._streams.values():
            ids = stream.ids
            stream.ids, stream.pieces = [], []
            stream.segmenter = Segmenter(boundary, prompt_len=0, reasoning_open=True)
            self._add_ids(stream, ids)
            self._redecode_changed(stream)

    # -- folding -----------------------------------------------------------------------------

    def _stream(self, sample_id: str) -> _Stream:
        stream = self._streams.get(sample_id)
        if stream is None:
            stream = _Stream(sample_id, self.boundary)
            self._streams[sample_id] = stream
            while len(self._streams) > self.keep:
                self._streams.popitem(last=False)
        return stream

    def _fold(self, stream: _Stream, event: CaptureEvent) -> None:
        stream.rid = event.rid or stream.rid
        stream.endpoint = event.endpoint or stream.endpoint
        if event.kind == "sent":
            if stream.ids:  # a retry starts the generation over
                stream.ids, stream.pieces = [], []
                stream.segmenter = Segmenter(self.boundary, prompt_len=0, reasoning_open=True)
            stream.state = "streaming"
        elif event.kind == "delta":
            self._add_ids(stream, event.new_ids)
        elif event.kind == "retry":
            stream.state, stream.detail = "retrying", event.detail or event.error_kind or ""
        elif event.kind == "finished":
            stream.state, stream.flags = "finished", event.flags
        elif event.kind == "failed":
            stream.state, stream.detail = "failed", event.detail or event.error_kind or ""

    def _add_ids(self, stream: _Stream, ids: Sequence[int]) -> None:
        if not ids:
            return
        stream.ids.extend(ids)
        changed = stream.segmenter.feed(ids)
        keep = len(stream.segmenter.segments) - len(changed)
        del stream.pieces[keep:]
        stream.pieces.extend([None] * len(changed))

    def _redecode_changed(self, stream: _Stream) -> None:
        segments = stream.segmenter.segments
        for index, piece in enumerate(stream.pieces):
            if piece is None:
                stream.pieces[index] = self._piece(stream.ids, segments[index])

    def _piece(self, ids: Sequence[int], segment: Segment) -> Piece:
        start = max(segment.start, len(ids) - self.tail_ids)
        tok = self.tokenizer
        return make_piece(
            segment.kind,
            ids[start : segment.end],
            tok.decode if tok else None,
            tok.token_text if tok else kimi_token_text,
        )

    def _view(self, stream: _Stream) -> StreamView:
        first_kept = len(stream.ids) - self.tail_ids
        segments = stream.segmenter.segments
        pieces = tuple(
            piece
            for piece, segment in zip(stream.pieces, segments, strict=True)
            if piece is not None and segment.end > first_kept
        )
        document = TokenDocument(pieces, 0, decoded=self.tokenizer is not None)
        return StreamView(
            stream.sample_id,
            stream.rid,
            stream.endpoint,
            stream.state,
            len(stream.ids),
            document,
            stream.flags,
            stream.detail,
        )

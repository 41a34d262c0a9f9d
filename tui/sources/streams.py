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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from msgspec import UnsetType

from eagle_tui.core.accept.requests import RequestAcceptance
from eagle_tui.core.capture.events import CaptureEvent, DeltaEvent
from eagle_tui.core.segments import Segment, Segmenter
from eagle_tui.core.tokenizer import BoundaryIds
from eagle_tui.tui.render.tokens import Piece, TokenDocument, kimi_token_text, make_piece
from eagle_tui.tui.sources.tokenizers import SharedTokenizer

StreamState = Literal["waiting", "streaming", "retrying", "finished", "failed", "end lost"]
ENDED_STATES: frozenset[StreamState] = frozenset({"finished", "failed", "end lost"})
"""``end lost``: the batch is over and every event that will come has come, yet this
request's end never arrived (dropped for a slow reader): the box stops saying it streams."""
END_LOST_DETAIL = "the batch ended; this request's end never reached the dashboard"
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
    slot: int = 0
    missed: int = 0
    """Output ids that never reached the dashboard: the box is incomplete."""
    acceptance: RequestAcceptance | None = None
    """A speculative server's acceptance of the finished request (docs/acceptance.md)."""

    @property
    def ended(self) -> bool:
        """True once the request finished or failed for good (or its end was lost)."""
        return self.state in ENDED_STATES


class _Stream:
    """Mutable per-request state (owned by the board's thread)."""

    def __init__(self, sample_id: str, boundary: BoundaryIds, slot: int) -> None:
        self.sample_id = sample_id
        self.slot = slot
        self.missed = 0
        """Output ids that never arrived (events dropped for a slow reader)."""
        self.rid: str | None = None
        self.endpoint: str | None = None
        self.state: StreamState = "waiting"
        self.flags: tuple[str, ...] = ()
        self.acceptance: RequestAcceptance | None = None
        self.detail = ""
        self.ids: list[int] = []
        self.segmenter = Segmenter(boundary, prompt_len=0, reasoning_open=True)
        self.pieces: list[Piece | None] = []

    @property
    def ended(self) -> bool:
        """True once the request finished or failed for good (or its end was lost)."""
        return self.state in ENDED_STATES


class StreamBoard:
    """Up to ``keep`` watched requests of one batch, each in a fixed slot.

    A stream keeps its slot from its first event until it has ended, has been shown ended
    (its final view returned by one ``apply``), and its slot is needed: slots are freed
    from the stream that ended first. A stream that starts while every slot is live waits,
    folded like the others, and takes the next slot that frees up, shown from its first id;
    beyond ``keep`` waiting streams, newer ones are not shown at all (and their later
    events are ignored). So a box never switches requests mid-generation and never shows
    the middle of a request as if it were its start.
    """

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
        self._streams: dict[str, _Stream] = {}
        """Every stream followed: shown (in a slot) or waiting for one."""
        self._slots: list[str | None] = [None] * keep
        self._waiting: list[str] = []
        self._ended_order: list[str] = []
        """Ended streams shown ended already, the one that ended first first."""
        self.skipped: set[str] = set()
        """Streams not shown because every slot was live and enough were waiting."""
        self.seen = 0
        """Distinct streams met so far (shown, waiting or skipped)."""

    def views(self) -> tuple[StreamView, ...]:
        """Every stream in a slot, by slot."""
        return tuple(self._view(self._streams[sid]) for sid in self._slots if sid is not None)

    def apply(self, events: Iterable[CaptureEvent]) -> tuple[StreamView, ...]:
        """Fold ``events`` in; the views of the shown streams that changed (by first change)."""
        changed: dict[str, _Stream] = {s.sample_id: s for s in self._promote_waiting()}
        for event in events:
            stream = self._stream(event)
            if stream is None:
                continue
            self._fold(stream, event)
            changed[stream.sample_id] = stream
        shown = [s for s in changed.values() if s.slot >= 0]
        for stream in shown:
            self._redecode_changed(stream)
            if stream.ended and stream.sample_id not in self._ended_order:
                self._ended_order.append(stream.sample_id)  # free from the next apply on
        return tuple(self._view(s) for s in shown)

    @property
    def live(self) -> int:
        """Streams shown that have not ended."""
        return sum(1 for sid in self._slots if sid is not None and not self._streams[sid].ended)

    @property
    def waiting(self) -> int:
        """Streams waiting for a slot."""
        return len(self._waiting)

    def end_lost(self) -> tuple[StreamView, ...]:
        """The batch is over and no event of it is left to come: every stream still open
        (its end was dropped) is marked ``end lost``; the views of those shown."""
        lost = [stream for stream in self._streams.values() if not stream.ended]
        for stream in lost:
            stream.state, stream.detail = "end lost", END_LOST_DETAIL
            if stream.slot >= 0:
                self._ended_order.append(stream.sample_id)
        return tuple(self._view(stream) for stream in lost if stream.slot >= 0)

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

    def _stream(self, event: CaptureEvent) -> _Stream | None:
        """The stream ``event`` belongs to; a new one takes a free slot, else waits for one
        (None when too many wait already, or for a stream not shown)."""
        sample_id = event.sample_id
        stream = self._streams.get(sample_id)
        if stream is not None:
            return stream
        if sample_id in self.skipped:
            if event.kind in ("finished", "failed", "rejected"):
                self.skipped.discard(sample_id)
            return None
        self.seen += 1
        slot = self._free_slot()
        if slot is None and len(self._waiting) >= self.keep:
            if event.kind not in ("finished", "failed", "rejected"):
                self.skipped.add(sample_id)
            return None
        stream = _Stream(sample_id, self.boundary, -1 if slot is None else slot)
        self._streams[sample_id] = stream
        if slot is None:
            self._waiting.append(sample_id)
        else:
            self._slots[slot] = sample_id
        return stream

    def _promote_waiting(self) -> list[_Stream]:
        """Waiting streams that get a slot now (oldest first)."""
        promoted = []
        while self._waiting:
            slot = self._free_slot()
            if slot is None:
                break
            stream = self._streams[self._waiting.pop(0)]
            stream.slot = slot
            self._slots[slot] = stream.sample_id
            promoted.append(stream)
        return promoted

    def _free_slot(self) -> int | None:
        if None in self._slots:
            return self._slots.index(None)
        if not self._ended_order:
            return None
        oldest = self._ended_order.pop(0)
        gone = self._streams.pop(oldest)
        self._slots[gone.slot] = None
        return gone.slot

    def _fold(self, stream: _Stream, event: CaptureEvent) -> None:
        stream.rid = event.rid or stream.rid
        if isinstance(event, DeltaEvent):
            self._delta(stream, event)
            return
        stream.endpoint = event.endpoint or stream.endpoint
        if event.kind == "sent":
            if stream.ids or stream.missed:  # a retry starts the generation over
                self._restart(stream)
            if stream.sample_id in self._ended_order:  # a resumed batch sent it again
                self._ended_order.remove(stream.sample_id)
            stream.state, stream.detail = "streaming", ""
        elif event.kind == "retry":
            stream.state, stream.detail = "retrying", event.detail or event.error_kind or ""
        elif event.kind == "finished":
            stream.state, stream.flags = "finished", event.flags
            stream.acceptance = (None if isinstance(event.acceptance, UnsetType)
                                 else event.acceptance)
            self._note_missing(stream, event.total)
        elif event.kind in ("failed", "rejected"):
            stream.state, stream.detail = "failed", event.detail or event.error_kind or ""

    def _restart(self, stream: _Stream) -> None:
        stream.ids, stream.pieces, stream.missed = [], [], 0
        stream.segmenter = Segmenter(self.boundary, prompt_len=0, reasoning_open=True)

    def _delta(self, stream: _Stream, event: DeltaEvent) -> None:
        if stream.state in ("waiting", "retrying"):
            stream.state = "streaming"
        # ``total`` counts every output id so far: more than we hold means ids were lost
        # (the worker drops events for a reader that falls behind).
        self._note_missing(stream, event.total - len(event.new_ids))
        self._add_ids(stream, event.new_ids)

    @staticmethod
    def _note_missing(stream: _Stream, expected: int) -> None:
        held = len(stream.ids) + stream.missed
        if expected > held:
            stream.missed += expected - held

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
            stream.slot,
            stream.missed,
            stream.acceptance,
        )

"""Splitting a token sequence into typed segments for display (no rendering here).

Kinds, in the order they usually appear:

    prompt       every prompt id, except a think id that ends the prompt
    think_start  one think id (<think>, 163606): the prompt's last id when it opens
                 reasoning, or a think id the model generated
    reasoning    generated ids inside a reasoning block
    think_end    one end-of-reasoning id (</think>, 163607)
    answer       generated ids outside reasoning and outside tool calls
    tool_call    one tool-call id (163595–163599: section/call begin and end, argument begin)
    tool_args    generated ids after a tool-call id, until the next marker (function ids and
                 arguments; the text between calls of one section)
    stop         one stop id (<|im_end|>)

Markers (think_start, think_end, tool_call, stop) are always single-id segments; adjacent ids
of any other kind merge into one segment. Positions index the whole sequence
(``prompt_ids + output_ids``). Generation starts inside reasoning when the prompt ends with
the think id (or when the caller says so, for an output-only stream).

:class:`Segmenter` does the same incrementally, for live streams: feed it ids as they arrive
and it returns the segments that are new or grew.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from eagle_tui.core.validate import Boundaries

SegmentKind = Literal[
    "prompt", "think_start", "reasoning", "think_end", "answer", "tool_call", "tool_args", "stop"
]
MARKER_KINDS: frozenset[SegmentKind] = frozenset({"think_start", "think_end", "tool_call", "stop"})


@dataclass(frozen=True, slots=True)
class Segment:
    """Ids ``start .. end-1`` of the sequence, all of one kind."""

    kind: SegmentKind
    start: int
    end: int

    @property
    def is_marker(self) -> bool:
        """True for a single boundary id (think_start, think_end, tool_call, stop)."""
        return self.kind in MARKER_KINDS

    def __len__(self) -> int:
        return self.end - self.start


def split_segments(
    ids: Sequence[int], prompt_len: int, boundary: Boundaries
) -> list[Segment]:
    """All segments of a complete (or partial) sequence whose first ``prompt_len`` ids
    are the prompt."""
    segmenter = Segmenter(boundary, prompt_len=prompt_len)
    segmenter.feed(ids)
    return list(segmenter.segments)


class Segmenter:
    """Incremental :func:`split_segments`: ``feed`` ids as they arrive.

    The first ``prompt_len`` ids fed are the prompt. ``reasoning_open`` says whether the
    output starts inside reasoning; None decides from the prompt's last id (for an
    output-only stream, with ``prompt_len=0``, pass it explicitly).
    """

    def __init__(
        self, boundary: Boundaries, *, prompt_len: int = 0, reasoning_open: bool | None = None
    ) -> None:
        """Start empty."""
        self._boundary = boundary
        self._prompt_len = prompt_len
        self._reasoning_open = reasoning_open
        self._stop = frozenset(boundary.stop)
        self._segments: list[Segment] = []
        self._length = 0
        self._state: SegmentKind = "reasoning" if reasoning_open else "answer"

    @property
    def segments(self) -> tuple[Segment, ...]:
        """Every segment so far."""
        return tuple(self._segments)

    @property
    def length(self) -> int:
        """Ids fed so far."""
        return self._length

    def feed(self, ids: Sequence[int]) -> list[Segment]:
        """Add ``ids``; returns the segments that changed, in order: the previous last
        segment (with its new end) if it grew, then every new segment."""
        first_changed = len(self._segments)
        for tid in ids:
            kind = self._classify(tid)
            first_changed = min(first_changed, self._append(kind))
            self._length += 1
        return self._segments[first_changed:]

    def _classify(self, tid: int) -> SegmentKind:
        """The kind of the id at the current position, updating the state."""
        position = self._length
        if position < self._prompt_len:
            return self._classify_prompt(tid, position)
        boundary = self._boundary
        if tid == boundary.think:
            self._state = "reasoning"
            return "think_start"
        if tid == boundary.think_end:
            self._state = "answer"
            return "think_end"
        if tid in boundary.tool_call:
            self._state = "tool_args"
            return "tool_call"
        if tid in self._stop:
            self._state = "answer"
            return "stop"
        return self._state

    def _classify_prompt(self, tid: int, position: int) -> SegmentKind:
        """Prompt ids are ``prompt``, except a think id that ends the prompt."""
        if position < self._prompt_len - 1:
            return "prompt"
        opens = self._boundary.think is not None and tid == self._boundary.think
        if self._reasoning_open is None:
            self._state = "reasoning" if opens else "answer"
        return "think_start" if opens else "prompt"

    def _append(self, kind: SegmentKind) -> int:
        """Extend the last segment or start a new one; returns the index that changed."""
        last = self._segments[-1] if self._segments else None
        if last is not None and last.kind == kind and kind not in MARKER_KINDS:
            self._segments[-1] = replace(last, end=last.end + 1)
            return len(self._segments) - 1
        self._segments.append(Segment(kind, self._length, self._length + 1))
        return len(self._segments) - 1

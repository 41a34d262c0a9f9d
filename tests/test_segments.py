"""Segments of a token sequence: kinds and positions, batch and incremental alike."""

from __future__ import annotations

import itertools

from eagle_tui.core import kimi
from eagle_tui.core.segments import Segment, Segmenter, split_segments
from eagle_tui.core.tokenizer import BoundaryIds

B = BoundaryIds(
    think=kimi.THINK, think_end=kimi.THINK_END, stop=(kimi.IM_END,), tool_call=kimi.TOOL_CALL_IDS
)
PROMPT = [kimi.IM_USER, 10, kimi.IM_END, kimi.IM_ASSISTANT, kimi.IM_MIDDLE, kimi.THINK]
OUTPUT = [
    100, 101, kimi.THINK_END, 200,
    kimi.TOOL_CALLS_SECTION_BEGIN, kimi.TOOL_CALL_BEGIN, 300, 301,
    kimi.TOOL_CALL_ARGUMENT_BEGIN, 302, kimi.TOOL_CALL_END, kimi.TOOL_CALLS_SECTION_END,
    kimi.IM_END,
]
SEQUENCE = PROMPT + OUTPUT


def kinds(segments: list[Segment]) -> list[tuple[str, int, int]]:
    return [(s.kind, s.start, s.end) for s in segments]


def test_full_sequence_splits_into_every_kind() -> None:
    assert kinds(split_segments(SEQUENCE, len(PROMPT), B)) == [
        ("prompt", 0, 5), ("think_start", 5, 6), ("reasoning", 6, 8), ("think_end", 8, 9),
        ("answer", 9, 10), ("tool_call", 10, 11), ("tool_call", 11, 12), ("tool_args", 12, 14),
        ("tool_call", 14, 15), ("tool_args", 15, 16), ("tool_call", 16, 17),
        ("tool_call", 17, 18), ("stop", 18, 19),
    ]


def test_segments_cover_the_sequence_without_gaps() -> None:
    segments = split_segments(SEQUENCE, len(PROMPT), B)
    assert segments[0].start == 0 and segments[-1].end == len(SEQUENCE)
    assert all(a.end == b.start for a, b in itertools.pairwise(segments))
    assert all(len(s) == 1 for s in segments if s.is_marker)


def test_prompt_boundary_tokens_inside_the_prompt_stay_prompt() -> None:
    prompt = [kimi.THINK, kimi.THINK_END, kimi.IM_END, 5, kimi.THINK]
    assert kinds(split_segments([*prompt, 7], len(prompt), B)) == [
        ("prompt", 0, 4), ("think_start", 4, 5), ("reasoning", 5, 6)
    ]


def test_prompt_without_think_starts_generation_in_the_answer() -> None:
    prompt = PROMPT[:-1]
    assert kinds(split_segments([*prompt, 7, 8, kimi.IM_END], len(prompt), B)) == [
        ("prompt", 0, 5), ("answer", 5, 7), ("stop", 7, 8)
    ]


def test_generated_think_reopens_reasoning() -> None:
    segments = split_segments([*PROMPT, 1, kimi.THINK_END, kimi.THINK, 2], len(PROMPT), B)
    assert [s.kind for s in segments][-4:] == ["reasoning", "think_end", "think_start",
                                               "reasoning"]


def test_incremental_feeding_matches_batch_at_every_split() -> None:
    expected = split_segments(SEQUENCE, len(PROMPT), B)
    for cut in range(len(SEQUENCE) + 1):
        segmenter = Segmenter(B, prompt_len=len(PROMPT))
        segmenter.feed(SEQUENCE[:cut])
        segmenter.feed(SEQUENCE[cut:])
        assert list(segmenter.segments) == expected, cut


def test_feed_one_by_one_returns_the_grown_and_new_segments() -> None:
    segmenter = Segmenter(B, prompt_len=len(PROMPT))
    segmenter.feed(PROMPT)
    assert segmenter.feed([100]) == [Segment("reasoning", 6, 7)]
    assert segmenter.feed([101]) == [Segment("reasoning", 6, 8)]  # grew: same start
    assert segmenter.feed([kimi.THINK_END, 200]) == [Segment("think_end", 8, 9),
                                                     Segment("answer", 9, 10)]
    assert segmenter.feed([]) == []
    assert segmenter.length == 10


def test_output_only_stream_can_start_in_reasoning() -> None:
    segmenter = Segmenter(B, reasoning_open=True)
    changed = segmenter.feed([1, 2, kimi.THINK_END, 3, kimi.IM_END])
    assert kinds(changed) == [("reasoning", 0, 2), ("think_end", 2, 3), ("answer", 3, 4),
                              ("stop", 4, 5)]


def test_unknown_boundaries_leave_everything_as_answer() -> None:
    bare = BoundaryIds(think=None, think_end=None, stop=(), tool_call=frozenset())
    assert kinds(split_segments([1, kimi.THINK, kimi.THINK_END, 4], 1, bare)) == [
        ("prompt", 0, 1), ("answer", 1, 4)
    ]

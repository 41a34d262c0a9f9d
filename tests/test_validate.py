"""Validation flags from ids: each flag raised by its own case, and a clean sample raises none."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from eagle_tui.core import kimi
from eagle_tui.core.capture.render import first_out_of_range
from eagle_tui.core.tokenizer import BoundaryIds
from eagle_tui.core.validate import FLAGS, Validation, validate_sample

B = BoundaryIds(
    think=kimi.THINK, think_end=kimi.THINK_END, stop=(kimi.IM_END,), tool_call=kimi.TOOL_CALL_IDS
)
NO_REASONING = BoundaryIds(think=None, think_end=None, stop=(kimi.IM_END,),
                           tool_call=frozenset())
PROMPT = [kimi.IM_USER, 10, 11, kimi.IM_END, kimi.IM_ASSISTANT, 20, kimi.IM_MIDDLE, kimi.THINK]
REASON, ANSWER = [100, 101, 102], [200, 201]
CLEAN_OUTPUT = [*REASON, kimi.THINK_END, *ANSWER, kimi.IM_END]
TOOL_SECTION = [kimi.TOOL_CALLS_SECTION_BEGIN, kimi.TOOL_CALL_BEGIN, 300,
                kimi.TOOL_CALL_ARGUMENT_BEGIN, 301, kimi.TOOL_CALL_END, kimi.TOOL_CALLS_SECTION_END]


def check(
    output: Sequence[int],
    prompt: Sequence[int] = PROMPT,
    *,
    finish: str = "stop",
    completion: int | None = None,
    prompt_tokens: int | None = None,
    boundary: BoundaryIds = B,
) -> Validation:
    return validate_sample(
        prompt, output, finish_kind=finish,
        completion_tokens=len(output) if completion is None else completion,
        prompt_tokens=len(prompt) if prompt_tokens is None else prompt_tokens,
        boundary=boundary, vocab_size=kimi.VOCAB_SIZE,
    )


def test_clean_sample_has_no_flags_and_the_think_end_index() -> None:
    result = check(CLEAN_OUTPUT)
    assert result.flags == () and result.clean
    assert result.think_end == len(PROMPT) + len(REASON)
    assert [*PROMPT, *CLEAN_OUTPUT][result.think_end] == kimi.THINK_END


@pytest.mark.parametrize(
    ("flag", "kwargs"),
    [
        ("prompt_no_think", {"prompt": PROMPT[:-1], "output": [*ANSWER, kimi.IM_END]}),
        ("no_think_end", {"output": [*REASON, kimi.IM_END]}),
        ("truncated", {"output": [*REASON, kimi.THINK_END, *ANSWER], "finish": "length"}),
        ("aborted", {"output": [*REASON], "finish": "abort"}),
        ("tool_call", {"output": [*REASON, kimi.THINK_END, *TOOL_SECTION, kimi.IM_END]}),
        ("tool_call_before_think_end", {"output": [*REASON, *TOOL_SECTION, kimi.THINK_END,
                                                   kimi.IM_END]}),
        ("empty_answer", {"output": [*REASON, kimi.THINK_END, kimi.IM_END]}),
        ("think_start_in_output", {"output": [*REASON, kimi.THINK_END, kimi.THINK, *ANSWER,
                                              kimi.IM_END]}),
        ("count_mismatch", {"output": CLEAN_OUTPUT, "completion": len(CLEAN_OUTPUT) - 1}),
        ("prompt_count_mismatch", {"output": CLEAN_OUTPUT, "prompt_tokens": len(PROMPT) + 1}),
        ("bad_token_id", {"output": [*REASON, kimi.THINK_END, kimi.VOCAB_SIZE, kimi.IM_END]}),
        ("bad_token_id", {"prompt": [-1, *PROMPT], "output": CLEAN_OUTPUT}),
        ("no_stop_token", {"output": [*REASON, kimi.THINK_END, *ANSWER]}),
    ],
)
def test_each_flag_is_raised_by_its_case(flag: str, kwargs: dict[str, object]) -> None:
    result = check(**kwargs)  # type: ignore[arg-type]
    assert flag in result.flags


def test_flags_follow_the_documented_order() -> None:
    result = check([*REASON, *TOOL_SECTION], finish="length", completion=0)
    assert result.flags == tuple(f for f in FLAGS if f in result.flags)
    assert set(result.flags) == {"no_think_end", "truncated", "tool_call",
                                 "tool_call_before_think_end", "count_mismatch"}


def test_missing_server_counts_are_mismatches() -> None:
    result = validate_sample(PROMPT, CLEAN_OUTPUT, finish_kind="stop", completion_tokens=None,
                             prompt_tokens=None, boundary=B, vocab_size=kimi.VOCAB_SIZE)
    assert result.flags == ("count_mismatch", "prompt_count_mismatch")


def test_tool_call_after_think_end_is_not_before_it() -> None:
    result = check([*REASON, kimi.THINK_END, *TOOL_SECTION, kimi.IM_END])
    assert result.flags == ("tool_call",)  # the tool section is the answer: not empty


def test_truncated_inside_reasoning_is_not_an_empty_answer() -> None:
    result = check(REASON, finish="length")
    assert result.flags == ("no_think_end", "truncated")
    assert result.think_end == -1


def test_think_end_in_the_prompt_is_not_the_generated_one() -> None:
    prompt = [kimi.THINK, kimi.THINK_END, *PROMPT]
    result = check(CLEAN_OUTPUT, prompt)
    assert result.think_end == len(prompt) + len(REASON)


def test_without_reasoning_the_whole_output_is_the_answer() -> None:
    prompt = PROMPT[:-1]
    assert check([*ANSWER, kimi.IM_END], prompt, boundary=NO_REASONING).flags == ()
    assert check([kimi.IM_END], prompt, boundary=NO_REASONING).flags == ("empty_answer",)


def test_non_thinking_prompt_flags_prompt_no_think_only() -> None:
    prompt = [*PROMPT, kimi.THINK_END]  # thinking=False renders <think></think>
    assert check([*ANSWER, kimi.IM_END], prompt).flags == ("prompt_no_think",)


def test_empty_output_with_stop_finish() -> None:
    assert check([]).flags == ("no_think_end", "no_stop_token")


def test_the_first_out_of_range_prompt_id_is_found_before_sending() -> None:
    assert first_out_of_range(PROMPT, kimi.VOCAB_SIZE) is None
    assert first_out_of_range([], kimi.VOCAB_SIZE) is None
    assert first_out_of_range([1, kimi.VOCAB_SIZE, -3], kimi.VOCAB_SIZE) == (1, kimi.VOCAB_SIZE)
    assert first_out_of_range([1, 2, -3], kimi.VOCAB_SIZE) == (2, -3)

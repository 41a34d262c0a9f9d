"""The fake model's output structure: reasoning, ``</think>``, answer or tool calls, stop."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sim_helpers import WEATHER_TOOLS, chat_prompt, decode

from eagle_tui.core import kimi
from eagle_tui.core.sim.launcher import SimProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(sim_server: SimProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim_server.url, timeout=30) as http:
        yield http


def finished_outputs(client: httpx.Client, prompts: list[list[int]]) -> list[list[int]]:
    """Greedy outputs of ``prompts`` that ended on the stop token (runaways left out)."""
    body = client.post("/generate", json={"input_ids": prompts, "sampling_params": {
        "max_new_tokens": 4000, "temperature": 0}}).json()
    outputs = [item["output_ids"] for item in body
               if item["meta_info"]["finish_reason"]["type"] == "stop"]
    assert len(outputs) >= len(prompts) // 2
    return outputs


def test_thinking_prompt_gets_reasoning_then_answer(client: httpx.Client) -> None:
    for output in finished_outputs(client, [chat_prompt(f"question {i}") for i in range(8)]):
        assert output.count(kimi.THINK_END) == 1
        assert kimi.THINK not in output
        end = output.index(kimi.THINK_END)
        assert end > 0  # some reasoning first
        assert output[-1] == kimi.IM_END
        assert not kimi.TOOL_CALL_IDS & set(output)
        assert decode(output[end + 1 : -1]).strip()  # a non-empty answer


def test_non_thinking_prompt_answers_directly(client: httpx.Client) -> None:
    prompts = [chat_prompt(f"quick {i}", think=False) for i in range(6)]
    for output in finished_outputs(client, prompts):
        assert kimi.THINK_END not in output and output[-1] == kimi.IM_END


def test_declared_tools_get_a_tool_call_section(client: httpx.Client) -> None:
    prompts = [chat_prompt(f"weather in town {i}", tools=WEATHER_TOOLS) for i in range(8)]
    for output in finished_outputs(client, prompts):
        end = output.index(kimi.THINK_END)
        section = output[output.index(kimi.TOOL_CALLS_SECTION_BEGIN) :]
        assert output.index(kimi.TOOL_CALLS_SECTION_BEGIN) > end
        assert section[-2:] == [kimi.TOOL_CALLS_SECTION_END, kimi.IM_END]
        text = decode(section)
        calls = re.findall(r"<\|tool_call_begin\|>functions\.(\w+):(\d+)"
                           r"<\|tool_call_argument_begin\|>(.*?)<\|tool_call_end\|>", text)
        assert calls
        for name, _index, arguments in calls:
            assert name == "get_weather"
            assert set(json.loads(arguments)) == {"city"}


def test_a_tool_result_is_answered_not_called_again(client: httpx.Client) -> None:
    prompts = [chat_prompt(f"weather {i}", tools=WEATHER_TOOLS, tool_result="sunny, 21 C")
               for i in range(6)]
    for output in finished_outputs(client, prompts):
        assert not kimi.TOOL_CALL_IDS & set(output)


def test_tools_stay_visible_in_text_with_default_skip_special(client: httpx.Client) -> None:
    body: Any = client.post("/generate", json={
        "input_ids": [chat_prompt(f"tools text {i}", tools=WEATHER_TOOLS) for i in range(4)],
        "sampling_params": {"max_new_tokens": 4000, "temperature": 0},
    }).json()
    texts = [item["text"] for item in body if kimi.TOOL_CALL_BEGIN in item["output_ids"]]
    assert texts
    for text in texts:  # tool and think tokens are not "special"; <|im_end|> is
        assert "</think>" in text and "<|tool_call_begin|>" in text
        assert "<|im_end|>" not in text

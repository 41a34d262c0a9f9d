"""What the fake model reads from a prompt: thinking on, tools declared, a tool result last.

Kimi's template opens each system block with ``<|im_system|>ROLE<|im_middle|>``:
tools are declared in a ``tool_declare`` block and tool results come back in a
``tool`` block. Only those few role names are decoded, never the whole prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from eagle_tui.core.sim.model.modeldir import ModelDir

_ROLE_SCAN = 8  # a role name is a couple of tokens; stop looking after this many


@dataclass(frozen=True)
class PromptShape:
    """The facts about a prompt that steer the fake model."""

    thinking: bool  # the prompt ends with <think>: the output starts inside reasoning
    tools_text: str | None  # the tool_declare block's text, when tools are declared
    answered_tool: bool  # a tool result is the latest turn: answer, do not call again


def read_prompt(prompt: Sequence[int], model: ModelDir) -> PromptShape:
    """Inspect ``prompt`` (ids) for the shape the model should follow."""
    special = model.special
    thinking = bool(prompt) and special.think is not None and prompt[-1] == special.think
    tools_text: str | None = None
    last_user = _last_index(prompt, special.im_user)
    last_tool_result = -1
    for start in _positions(prompt, special.im_system):
        role, body_start = _role_at(prompt, start, model)
        if role == "tool_declare":
            tools_text = model.decode(list(_block(prompt, body_start, model)))
        elif role == "tool":
            last_tool_result = start
    return PromptShape(thinking, tools_text, last_tool_result > last_user)


def _positions(prompt: Sequence[int], token: int | None) -> list[int]:
    if token is None:
        return []
    return [i for i, t in enumerate(prompt) if t == token]


def _last_index(prompt: Sequence[int], token: int | None) -> int:
    found = _positions(prompt, token)
    return found[-1] if found else -1


def _role_at(prompt: Sequence[int], start: int, model: ModelDir) -> tuple[str, int]:
    middle = model.special.im_middle
    end = min(len(prompt), start + 1 + _ROLE_SCAN)
    for i in range(start + 1, end):
        if prompt[i] == middle:
            return model.decode(list(prompt[start + 1 : i])).strip(), i + 1
    return "", start + 1


def _block(prompt: Sequence[int], start: int, model: ModelDir) -> Sequence[int]:
    im_end = model.special.im_end
    for i in range(start, len(prompt)):
        if prompt[i] == im_end:
            return prompt[start:i]
    return prompt[start:]

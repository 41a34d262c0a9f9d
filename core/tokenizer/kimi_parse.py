"""The model's own answer, parsed from its output ids (never from text, never by SGLang).

Multi-turn capture puts the model's answer to turn k into the history of turn k+1 as an
assistant message: ``reasoning_content``, ``content`` and ``tool_calls``. The boundaries
come from ids alone: reasoning ends at the first ``</think>`` (163607), the tool-call
section runs from ``<|tool_calls_section_begin|>`` to ``<|tool_calls_section_end|>``, and
each call is ``<|tool_call_begin|>ID<|tool_call_argument_begin|>ARGS<|tool_call_end|>``.
Only the pieces between boundaries are decoded to text, because the chat template takes
text messages. SGLang's reasoning and tool-call parsers work on text and drop or misplace
these tokens, which is why they are not used.

An answer that is not a whole turn (no ``</think>`` after open reasoning, a tool section or
call that never closes, no stop id at the end) is ``complete=False`` with the reason: it
cannot be put into a history as the model's turn.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eagle_tui.core import kimi

Decode = Callable[[Sequence[int]], str]
TokenLookup = Callable[[str], "int | None"]

_KIMI_CALL_ID = re.compile(r"^(?:functions\.)?(?P<name>.+?)(?::\d+)?$")


@dataclass(frozen=True, slots=True)
class AnswerTokens:
    """The ids that structure an answer, resolved by token name in the loaded tokenizer."""

    think: int | None
    think_end: int | None
    stop: frozenset[int]
    section_begin: int | None
    section_end: int | None
    call_begin: int | None
    argument_begin: int | None
    call_end: int | None

    @classmethod
    def resolve(cls, token_id: TokenLookup, stop: Sequence[int]) -> AnswerTokens:
        """Look every structural token up by its Kimi name (None when the tokenizer lacks it)."""
        begin, end, call, argument, call_end = (token_id(n) for n in kimi.TOOL_CALL_TOKENS)
        return cls(token_id(kimi.THINK_TOKEN), token_id(kimi.THINK_END_TOKEN), frozenset(stop),
                   begin, end, call, argument, call_end)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call as the model wrote it: its id text, the function name, the arguments text."""

    id: str
    name: str
    arguments: str

    def as_message_call(self) -> dict[str, Any]:
        """The OpenAI-style ``tool_calls`` entry chat templates read."""
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    """The model's turn. ``reasoning`` is None when the output did not reason."""

    reasoning: str | None
    content: str
    tool_calls: tuple[ToolCall, ...]
    complete: bool
    problem: str | None = None

    def as_message(self) -> dict[str, Any]:
        """The assistant message that stands for this answer in a later turn's history."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning is not None:
            message["reasoning_content"] = self.reasoning
        if self.tool_calls:
            message["tool_calls"] = [call.as_message_call() for call in self.tool_calls]
        return message


def parse_answer(output_ids: Sequence[int], *, reasoning_open: bool, tokens: AnswerTokens,
                 decode: Decode) -> ParsedAnswer:
    """Split ``output_ids`` into reasoning, content and tool calls (see the module docstring).

    ``reasoning_open``: the prompt ended with ``<think>``, so the output starts inside
    reasoning. A ``<think>`` the model writes itself as its first id opens reasoning too
    (templates where the model opens it, like Qwen3's).
    """
    body, stopped = _without_stop(output_ids, tokens.stop)
    if not reasoning_open and body[:1] == [tokens.think] and tokens.think is not None:
        body, reasoning_open = body[1:], True
    reasoning: str | None = None
    if reasoning_open:
        end = _index(body, tokens.think_end)
        if end is None:
            return _incomplete("the output never closes its reasoning (no </think>)")
        reasoning, body = decode(body[:end]), body[end + 1:]
    content_ids, calls, problem = _split_tool_section(body, tokens, decode)
    if problem is None and not stopped:
        problem = "the output does not end with a stop id (cut short)"
    return ParsedAnswer(reasoning, decode(content_ids), calls, problem is None, problem)


def _without_stop(ids: Sequence[int], stop: frozenset[int]) -> tuple[list[int], bool]:
    body = list(ids)
    if body and body[-1] in stop:
        return body[:-1], True
    return body, False


def _incomplete(problem: str) -> ParsedAnswer:
    return ParsedAnswer(None, "", (), False, problem)


def _index(ids: Sequence[int], token: int | None, start: int = 0) -> int | None:
    if token is None:
        return None
    for position in range(start, len(ids)):
        if ids[position] == token:
            return position
    return None


def _split_tool_section(body: list[int], tokens: AnswerTokens, decode: Decode) -> tuple[
    list[int], tuple[ToolCall, ...], str | None
]:
    """(content ids, calls, problem): content is what precedes the tool-call section."""
    begin = _index(body, tokens.section_begin)
    if begin is None:
        return body, (), None
    end = _index(body, tokens.section_end, begin + 1)
    if end is None:
        return body[:begin], (), "the tool-call section never closes"
    calls, problem = _calls(body[begin + 1:end], tokens, decode)
    return body[:begin], calls, problem


def _calls(section: list[int], tokens: AnswerTokens, decode: Decode) -> tuple[
    tuple[ToolCall, ...], str | None
]:
    """Every ``call_begin ID argument_begin ARGS call_end`` of a section, in order."""
    calls: list[ToolCall] = []
    position = _index(section, tokens.call_begin)
    while position is not None:
        argument = _index(section, tokens.argument_begin, position + 1)
        end = _index(section, tokens.call_end, position + 1)
        if argument is None or end is None or argument > end:
            return tuple(calls), f"tool call {len(calls)} is not closed as Kimi closes calls"
        call_id = decode(section[position + 1:argument]).strip()
        calls.append(ToolCall(call_id, function_name(call_id), decode(section[argument + 1:end])))
        position = _index(section, tokens.call_begin, end + 1)
    return tuple(calls), None


def function_name(call_id: str) -> str:
    """The function a Kimi call id names: ``functions.get_weather:0`` -> ``get_weather``."""
    match = _KIMI_CALL_ID.match(call_id)
    return match.group("name") if match else call_id

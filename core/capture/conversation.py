"""Multi-turn planning: which assistant turns a conversation has, and each turn's history.

A *turn* is a run of consecutive assistant messages that follows at least one user message
(a tool-call message and, rarely, a second assistant message right after it); an open end
(the conversation ends with a user or tool message) is one more turn, as in single-turn
capture. The model's one answer stands for the whole run.

With ``history="dataset"`` turn k's history is the dataset's messages before it. With
``history="model"`` the model's own answer to every earlier turn replaces the dataset's run
in the history (the answers are parsed from output ids, :mod:`core.tokenizer.kimi_parse`),
and :meth:`Conversation.record_answer` decides whether the conversation can go on:

- tool results follow the dataset's run: the model must have made the same calls (same
  functions, same arguments after JSON normalisation, in any order); then the dataset's
  results are kept, re-addressed to the model's call ids, and the conversation goes on;
- otherwise (other calls, no calls, or calls where the dataset has no results) the turn
  *diverged*: the row is flagged ``tool_call_diverged`` and the conversation ends there, or,
  with ``on_divergence="dataset"``, the dataset's run (its calls and results) is kept in the
  history instead and the conversation goes on;
- an answer that is not a whole turn (cut short, reasoning never closed) ends it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from eagle_tui.core.capture.records import Message
from eagle_tui.core.sample_ids import TURN_SEPARATOR
from eagle_tui.core.tokenizer.kimi_parse import ParsedAnswer, ToolCall, function_name
from eagle_tui.core.validate import DIVERGED_FLAG, ENDED_FLAG, ending_reason

HistoryMode = Literal["dataset", "model"]
DivergencePolicy = Literal["end", "dataset"]



class MultiTurn(msgspec.Struct, frozen=True):
    """How a multi-turn batch (``capture --turns all``) builds each turn's history."""

    history: HistoryMode = "dataset"
    on_divergence: DivergencePolicy = "end"



@dataclass(frozen=True, slots=True)
class TurnTag:
    """Where a row sits in its conversation (the multi-turn shard columns)."""

    conversation_id: str
    turn: int
    parent_id: str | None


@dataclass(frozen=True, slots=True)
class TurnSlot:
    """Where turn k sits: messages ``start .. end-1`` are the dataset's assistant run (empty
    for the open end)."""

    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Verdict:
    """What an answer means for the conversation: go on or not, and the row's extra flags."""

    go_on: bool
    flags: tuple[str, ...] = ()
    ended: str | None = None  # why the conversation ends here (None when it goes on)
    reason: str | None = None  # the same, short (``ending_reason``), when turns are left


def plan_turns(messages: Sequence[Message]) -> tuple[TurnSlot, ...]:
    """Every turn of ``messages`` in order (see the module docstring)."""
    slots: list[TurnSlot] = []
    seen_user = False
    index = 0
    while index < len(messages):
        role = messages[index]["role"]
        if role == "assistant" and seen_user:
            end = index
            while end < len(messages) and messages[end]["role"] == "assistant":
                end += 1
            slots.append(TurnSlot(index, end))
            index = end
            continue
        seen_user = seen_user or role == "user"
        index += 1
    if messages and messages[-1]["role"] != "assistant" and seen_user:
        slots.append(TurnSlot(len(messages), len(messages)))
    return tuple(slots)


def turn_sample_id(conversation_id: str, turn: int) -> str:
    """The row id of ``turn`` of a conversation: ``<conversation_id>#turn<k>``."""
    return f"{conversation_id}{TURN_SEPARATOR}{turn}"


def normalized_arguments(arguments: object) -> str:
    """Arguments as canonical JSON (sorted keys, no spaces); text that is not JSON, or JSON
    nested too deep to parse (a poison record), stays as it is, stripped."""
    text = arguments.strip() if isinstance(arguments, str) else None
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else arguments
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return text if text is not None else f"<{type(arguments).__name__} not comparable>"


def dataset_calls(run: Sequence[Message]) -> list[dict[str, Any]]:
    """Every ``tool_calls`` entry of an assistant run, in order."""
    return [call for message in run for call in message.get("tool_calls") or []
            if isinstance(call, dict)]


def _call_key(name: object, arguments: object) -> tuple[str, str]:
    return str(name), normalized_arguments(arguments)


def _dataset_key(call: dict[str, Any]) -> tuple[str, str]:
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    assert isinstance(function, dict)
    name = function.get("name") or function_name(str(call.get("id", "")))
    return _call_key(name, function.get("arguments", {}))


def match_calls(model: Sequence[ToolCall], dataset: Sequence[dict[str, Any]]) -> (
    dict[str, str] | None
):
    """The dataset call id -> model call id pairing when both made the same calls (any
    order); None when they differ."""
    if len(model) != len(dataset):
        return None
    unused = list(model)
    pairing: dict[str, str] = {}
    for call in dataset:
        key = _dataset_key(call)
        found = next((m for m in unused if _call_key(m.name, m.arguments) == key), None)
        if found is None:
            return None
        unused.remove(found)
        if isinstance(call.get("id"), str):
            pairing[call["id"]] = found.id
    return pairing


class Conversation:
    """One conversation under one sampling preset, turn by turn (event loop or one thread)."""

    def __init__(self, messages: Sequence[Message], *, history: HistoryMode,
                 on_divergence: DivergencePolicy) -> None:
        self.messages = tuple(messages)
        self.slots = plan_turns(self.messages)
        self._mode = history
        self._policy = on_divergence
        self._history: list[Message] = []
        self._cursor = 0  # dataset messages before this index are in _history
        self._renamed: dict[str, str] = {}  # dataset call id -> the model's id for it

    @property
    def turns(self) -> int:
        """How many turns the conversation has."""
        return len(self.slots)

    def prompt_messages(self, turn: int) -> list[Message]:
        """The history turn ``turn`` is generated from (call turns in order, once each)."""
        slot = self.slots[turn]
        if self._mode == "dataset":
            return list(self.messages[: slot.start])
        self._history += [self._readdressed(m) for m in self.messages[self._cursor : slot.start]]
        self._cursor = slot.start
        return list(self._history)

    def record_answer(self, turn: int, answer: ParsedAnswer,
                      finish: str | None = None) -> Verdict:
        """Take the model's answer to ``turn`` (``finish``: its finish reason) into the
        history; say whether to go on."""
        if self._mode == "dataset":
            return Verdict(go_on=True)
        if turn + 1 >= self.turns:
            return Verdict(go_on=False)  # nothing follows: no history to build, no results
        if not answer.complete:
            return Verdict(go_on=False, flags=(ENDED_FLAG,),
                           ended=f"turn {turn} is not a whole answer ({answer.problem})",
                           reason=ending_reason(_problem_flags(answer.problem), finish))
        slot = self.slots[turn]
        run = self.messages[slot.start : slot.end]
        pairing = self._pairing(slot, answer)
        if pairing is not None:
            self._renamed.update(pairing)
            self._history.append(answer.as_message())
        elif self._policy == "dataset":
            self._history += [self._readdressed(m) for m in run]
        else:
            self._cursor = slot.end
            return Verdict(go_on=False, flags=(DIVERGED_FLAG, ENDED_FLAG),
                           ended=f"turn {turn}: the model's tool calls differ from the dataset's",
                           reason=ending_reason((DIVERGED_FLAG,), finish))
        self._cursor = slot.end
        return Verdict(go_on=True, flags=() if pairing is not None else (DIVERGED_FLAG,))

    def _pairing(self, slot: TurnSlot, answer: ParsedAnswer) -> dict[str, str] | None:
        """How dataset call ids map to the model's, or None when the answer diverged."""
        wanted = dataset_calls(self.messages[slot.start : slot.end])
        results_follow = (slot.end < len(self.messages)
                          and self.messages[slot.end]["role"] == "tool")
        if not answer.tool_calls and not results_follow:
            return {}
        return match_calls(answer.tool_calls, wanted)

    def _readdressed(self, message: Message) -> Message:
        """A dataset tool result addressed to the model's call id when the model made it."""
        call_id = message.get("tool_call_id")
        if message["role"] != "tool" or call_id not in self._renamed:
            return message
        return {**message, "tool_call_id": self._renamed[call_id]}


def _problem_flags(problem: str | None) -> tuple[str, ...]:
    """The validation flag a parse problem corresponds to (for :func:`ending_reason`)."""
    text = problem or ""
    if "</think>" in text:
        return ("no_think_end",)
    if "stop id" in text:
        return ("no_stop_token",)
    return ()

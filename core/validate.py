"""Validation of one captured generation, from token ids only (never from text).

Inputs: the prompt ids as sent, the output ids as received, SGLang's finish reason and
token counts, the boundary ids of the tokenizer and the vocabulary bound. Terms used below:

- *think*, *think_end*: ``boundary.think`` (``<think>``, 163606) and ``boundary.think_end``
  (``</think>``, 163607); *stop*: any id in ``boundary.stop``; *tool-call id*: any id in
  ``boundary.tool_call`` (163595–163599).
- *reasoning open*: ``boundary.think`` is known and the prompt's last id is think (the
  thinking-mode generation prompt); the output then starts inside reasoning.
- *answer*: the output ids after the first think_end, or the whole output when reasoning is
  not open; trailing stop ids are not part of it. With reasoning open and no think_end there
  is no answer at all (that is ``no_think_end``, not ``empty_answer``).

Flags (a row's ``flags`` lists those raised, in this order; empty means clean):

``prompt_no_think``
    ``boundary.think`` is known and the prompt does not end with it (the template did not
    open reasoning: thinking disabled, or a different template).
``no_think_end``
    reasoning is open and no think_end id appears in the output.
``truncated``
    ``finish_kind == "length"`` (hit ``max_new_tokens``).
``aborted``
    ``finish_kind == "abort"``.
``tool_call``
    the output holds at least one tool-call id (informational, not an error).
``tool_call_before_think_end``
    reasoning is open and a tool-call id appears in the output before the first think_end,
    or with no think_end at all (Kimi sometimes opens a tool section without closing
    reasoning).
``empty_answer``
    an answer exists (see above) and holds no ids.
``think_start_in_output``
    a think id appears in the output (a second reasoning block, or a confused model).
``count_mismatch``
    ``completion_tokens`` is missing or differs from ``len(output_ids)``.
``prompt_count_mismatch``
    ``prompt_tokens`` is missing or differs from ``len(prompt_ids)`` (the server did not
    see exactly the prompt we sent: truncation, a different tokenization path). Kept apart
    from ``count_mismatch`` because the cause and the fix differ.
``bad_token_id``
    an id in the prompt or the output is negative or ``>= vocab_size``.
``no_stop_token``
    ``finish_kind == "stop"`` but the output is empty or its last id is not a stop id.
``over_max_new_tokens``
    ``max_new_tokens`` is given and the output holds more ids than it allows: more than
    ``max_new_tokens``, or ``max_new_tokens + 1`` when the last id is a stop id. The server
    did not honour the request (a proxy merging answers, a broken or hostile server); such
    rows are kept (the ids are what came) but not exported by default
    (:data:`NOT_EXPORTED_BY_DEFAULT`). Far longer outputs are refused by the client and the
    row fails instead (``core.sglang.limits``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

FLAGS: tuple[str, ...] = (
    "prompt_no_think",
    "no_think_end",
    "truncated",
    "aborted",
    "tool_call",
    "tool_call_before_think_end",
    "empty_answer",
    "think_start_in_output",
    "count_mismatch",
    "prompt_count_mismatch",
    "bad_token_id",
    "no_stop_token",
    "over_max_new_tokens",
    "tool_call_diverged",
    "conversation_ended",
)
"""Every flag, in the order rows list them. ``tool_call_diverged`` and ``conversation_ended``
are not computed here: multi-turn capture sets them when the model's tool calls differ from
the dataset's, and on the last turn of a conversation that ends before its last turn
(``core.capture.conversation``)."""

DIVERGED_FLAG = "tool_call_diverged"
ENDED_FLAG = "conversation_ended"
ENDINGS_SHOWN = 20
"""Endings listed by name (summary, stats); the rest are counted."""


def ending_reason(flags: Sequence[str], finish_reason: str | None) -> str:
    """Why a conversation ended at a row with ``flags`` (the row of its last generated turn):
    ``no </think> (truncated)``, ``tool calls differ from the dataset's``, ..."""
    if DIVERGED_FLAG in flags:
        reason = "tool calls differ from the dataset's"
    elif "no_think_end" in flags:
        reason = "no </think>"
    elif "no_stop_token" in flags:
        reason = "no stop token"
    elif "aborted" in flags:
        reason = "aborted"
    else:
        reason = "not a whole answer"
    truncated = finish_reason == "length" or "truncated" in flags
    return f"{reason} (truncated)" if truncated else reason


def ending_text(conversation_id: str, turn: int, reason: str) -> str:
    """``conversation c004 ended after turn 0: no </think> (truncated)``."""
    return f"conversation {conversation_id} ended after turn {turn}: {reason}"


NOT_EXPORTED_BY_DEFAULT: frozenset[str] = frozenset({"over_max_new_tokens"})
"""Flags whose rows an export leaves out unless asked for: the ids did not come the way the
request asked, so they are not the model's answer to it."""


class Boundaries(Protocol):
    """The boundary ids validation needs (``core.tokenizer.BoundaryIds`` has them)."""

    @property
    def think(self) -> int | None: ...
    @property
    def think_end(self) -> int | None: ...
    @property
    def stop(self) -> tuple[int, ...]: ...
    @property
    def tool_call(self) -> frozenset[int]: ...


@dataclass(frozen=True, slots=True)
class Validation:
    """Flags raised (in :data:`FLAGS` order) and the index of the first generated
    think_end in ``prompt_ids + output_ids`` (-1 if none)."""

    flags: tuple[str, ...]
    think_end: int

    @property
    def clean(self) -> bool:
        """True when no flag was raised."""
        return not self.flags


def validate_sample(
    prompt_ids: Sequence[int],
    output_ids: Sequence[int],
    *,
    finish_kind: str,
    completion_tokens: int | None,
    prompt_tokens: int | None,
    boundary: Boundaries,
    vocab_size: int,
    max_new_tokens: int | None = None,
) -> Validation:
    """Validate one generation; see the module docstring for every flag's definition.

    ``max_new_tokens`` (what the request asked for) enables ``over_max_new_tokens``."""
    reasoning_open = boundary.think is not None and bool(prompt_ids) and (
        prompt_ids[-1] == boundary.think
    )
    end_at = _first_index(output_ids, boundary.think_end)
    tool_at = _first_of(output_ids, boundary.tool_call)
    raised = {
        "prompt_no_think": boundary.think is not None and not reasoning_open,
        "no_think_end": reasoning_open and end_at is None,
        "truncated": finish_kind == "length",
        "aborted": finish_kind == "abort",
        "tool_call": tool_at is not None,
        "tool_call_before_think_end": reasoning_open and tool_at is not None
        and (end_at is None or tool_at < end_at),
        "empty_answer": _answer_is_empty(output_ids, end_at, reasoning_open, boundary.stop),
        "think_start_in_output": _first_index(output_ids, boundary.think) is not None,
        "count_mismatch": completion_tokens != len(output_ids),
        "prompt_count_mismatch": prompt_tokens != len(prompt_ids),
        "bad_token_id": not _in_vocab(prompt_ids, vocab_size)
        or not _in_vocab(output_ids, vocab_size),
        "no_stop_token": finish_kind == "stop"
        and (not output_ids or output_ids[-1] not in boundary.stop),
        "over_max_new_tokens": _over_max_new_tokens(output_ids, max_new_tokens, boundary.stop),
    }
    think_end = -1 if end_at is None else len(prompt_ids) + end_at
    return Validation(tuple(flag for flag in FLAGS if raised.get(flag)), think_end)


def _over_max_new_tokens(
    output_ids: Sequence[int], max_new_tokens: int | None, stop: tuple[int, ...]
) -> bool:
    """More output ids than ``max_new_tokens`` allows (one more when the last is a stop)."""
    if max_new_tokens is None or len(output_ids) <= max_new_tokens:
        return False
    allowed = max_new_tokens + (1 if output_ids[-1] in stop else 0)
    return len(output_ids) > allowed


def _in_vocab(ids: Sequence[int], vocab_size: int) -> bool:
    """True when every id is in ``0 .. vocab_size-1`` (min/max run in C)."""
    return not ids or (min(ids) >= 0 and max(ids) < vocab_size)


def _first_index(ids: Sequence[int], token: int | None) -> int | None:
    """Position of the first ``token`` in ``ids``; None when absent or token unknown."""
    if token is None:
        return None
    try:
        return ids.index(token)
    except ValueError:
        return None


def _first_of(ids: Sequence[int], tokens: frozenset[int]) -> int | None:
    """Position of the first id that is in ``tokens``."""
    # isdisjoint runs in C and most outputs hold no tool-call id: skip the Python loop.
    if not tokens or tokens.isdisjoint(ids):
        return None
    return next((i for i, tid in enumerate(ids) if tid in tokens), None)


def _answer_is_empty(
    output_ids: Sequence[int], end_at: int | None, reasoning_open: bool, stop: tuple[int, ...]
) -> bool:
    """True when an answer exists and holds no ids (trailing stop ids excluded)."""
    if end_at is not None:
        start = end_at + 1
    elif not reasoning_open:
        start = 0
    else:
        return False
    end = len(output_ids)
    while end > start and output_ids[end - 1] in stop:
        end -= 1
    return end <= start

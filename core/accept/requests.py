"""One finished request's acceptance, from its ``/generate`` ``meta_info``.

SGLang 0.5.23 (``tokenizer_manager.py``) adds the ``spec_*`` fields to a finished answer only
when a speculative algorithm ran at least one verify step for it:

- ``spec_verify_ct``: verify steps (target forward passes over a draft);
- ``spec_accept_length`` = ``completion_tokens / spec_verify_ct``. It counts the token of the
  prefill and the bonus token of every step, so it is at least 1 plus a little;
- ``spec_num_correct_drafts`` and ``spec_num_proposed_drafts`` (= verify steps x (draft
  tokens - 1)); ``spec_accept_rate`` is their ratio;
- ``spec_correct_drafts_histogram``: index ``k`` holds the verify steps that accepted exactly
  ``k`` drafts (absent when empty).

The OpenAI-compatible routes drop these fields: only the native ``/generate`` has them.

A capture stores each answer's counts in its shard row (the ``acceptance`` column, whose
fields are :class:`RequestAcceptance`'s); :func:`stored_acceptance` reads them back.

Counts are never believed as they come: :func:`count_problem` checks them against each other
(and against the server's draft config and the ids received, when known), so a server, a
proxy or an edited shard that claims 10^15 proposed drafts in one verify step is refused
before a per-position list of that length is built.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

MAX_COUNT = (1 << 31) - 1
"""The largest count believed (what a shard's int32 column holds; no answer is longer)."""
IMPOSSIBLE = "impossible acceptance counts"
"""How a ValueError for counts no server produces begins (:func:`request_acceptance`)."""
MAX_DRAFT_TOKENS = 256
"""Drafts per verify step believed when the server's ``speculative_num_draft_tokens`` is not
known (SGLang's trees use up to a few dozen): the per-position figures have that many entries
at most."""


class RequestAcceptance(msgspec.Struct, frozen=True):
    """The acceptance counts of one request; figures are derived, never stored twice.

    ``verify_steps`` is 0 for a request that had no verify step (speculation off, or an
    answer of one token): it still counts in a category's Σcompletion, as in SpecForge.
    """

    completion_tokens: int
    verify_steps: int = 0
    correct_drafts: int = 0
    proposed_drafts: int = 0
    histogram: tuple[int, ...] = ()

    @property
    def accept_length(self) -> float | None:
        """Tokens per verify step (``spec_accept_length``); None without a verify step."""
        return self.completion_tokens / self.verify_steps if self.verify_steps else None

    @property
    def accept_rate(self) -> float | None:
        """Accepted / proposed drafts (``spec_accept_rate``); None without a proposal."""
        return self.correct_drafts / self.proposed_drafts if self.proposed_drafts else None

    @property
    def drafts_per_step(self) -> int | None:
        """k, the drafts proposed per verify step (draft tokens - 1), when known."""
        return self.proposed_drafts // self.verify_steps if self.verify_steps else None

    @property
    def per_position(self) -> tuple[float, ...]:
        """P(at least j drafts accepted in a verify step), j = 1..k (see
        :func:`per_position_acceptance`)."""
        return per_position_acceptance(self.histogram, self.drafts_per_step)


def request_acceptance(meta_info: Mapping[str, Any], *, draft_tokens: int | None = None,
                       output_tokens: int | None = None) -> RequestAcceptance:
    """The acceptance of one ``meta_info``; ValueError names a field of the wrong type, or
    counts no server can produce (:func:`count_problem`, given the server's
    ``draft_tokens`` and the ``output_tokens`` received, when known).

    A ``meta_info`` without ``spec_verify_ct`` is a request with no verify step."""
    completion = _count(meta_info, "completion_tokens", required=True)
    histogram = meta_info.get("spec_correct_drafts_histogram") or ()
    if not isinstance(histogram, list | tuple) or not all(_is_count(x) for x in histogram):
        raise ValueError(
            f"meta_info spec_correct_drafts_histogram is {_short(histogram)}, not a list of "
            "counts"
        )
    acceptance = RequestAcceptance(
        completion_tokens=completion,
        verify_steps=_count(meta_info, "spec_verify_ct"),
        correct_drafts=_count(meta_info, "spec_num_correct_drafts"),
        proposed_drafts=_count(meta_info, "spec_num_proposed_drafts"),
        histogram=tuple(histogram),
    )
    problem = count_problem(acceptance, draft_tokens=draft_tokens, output_tokens=output_tokens)
    if problem:
        raise ValueError(f"{IMPOSSIBLE}: {problem}")
    return acceptance


def stored_acceptance(counts: Mapping[str, Any] | None) -> RequestAcceptance | None:
    """The acceptance a shard row stored (``ShardRow.acceptance``), None when it stored none;
    ValueError names a field that does not fit (a shard written by another tool) or counts
    no server produces (an edited shard, or one stored before they were checked)."""
    if counts is None:
        return None
    try:
        acceptance = msgspec.convert(counts, RequestAcceptance)
    except msgspec.ValidationError as e:
        raise ValueError(f"stored acceptance {e}") from None
    problem = count_problem(acceptance)
    if problem:
        raise ValueError(f"stored acceptance counts are impossible: {problem}")
    return acceptance


def count_problem(acceptance: RequestAcceptance, *, draft_tokens: int | None = None,
                  output_tokens: int | None = None) -> str | None:
    """Why ``acceptance`` cannot be one answer's counts, else None.

    An answer is its prefill token plus, per verify step, a bonus token and the drafts that
    step accepted (SGLang drops the surplus of a step cut at ``max_new_tokens``), so:
    completion = the ids received; 1 <= verify steps <= completion when it speculated;
    correct <= proposed <= verify steps x drafts per step (at most ``draft_tokens``, the
    server's ``speculative_num_draft_tokens``, else :data:`MAX_DRAFT_TOKENS`); completion <=
    1 + verify steps + proposed; the histogram has one entry per possible count of accepted
    drafts, its entries sum to the verify steps and weigh to the correct drafts."""
    a = acceptance
    counts = {"completion_tokens": a.completion_tokens, "spec_verify_ct": a.verify_steps,
              "spec_num_correct_drafts": a.correct_drafts,
              "spec_num_proposed_drafts": a.proposed_drafts}
    for name, value in counts.items():
        if value > MAX_COUNT:
            return f"{name} {_short(value)} is more than any answer holds ({MAX_COUNT:,})"
    if output_tokens is not None and a.completion_tokens != output_tokens:
        return (f"completion_tokens {a.completion_tokens:,} for {output_tokens:,} output ids "
                "received")
    if a.verify_steps == 0:
        return _unverified_problem(a)
    return _step_problem(a, draft_tokens) or _histogram_problem(a, draft_tokens)


def _unverified_problem(a: RequestAcceptance) -> str | None:
    if a.correct_drafts or a.proposed_drafts or any(a.histogram):
        return "drafts counted without a verify step"
    return None


def _step_problem(a: RequestAcceptance, draft_tokens: int | None) -> str | None:
    per_step = draft_tokens if draft_tokens is not None and draft_tokens > 0 else MAX_DRAFT_TOKENS
    source = (f"the server's {per_step} draft tokens" if per_step == draft_tokens
              else f"{per_step} drafts per step, more than any server drafts")
    if a.verify_steps > a.completion_tokens:
        return (f"spec_verify_ct {a.verify_steps:,} is more than completion_tokens "
                f"{a.completion_tokens:,} (a verify step emits at least one token)")
    if a.correct_drafts > a.proposed_drafts:
        return (f"spec_num_correct_drafts {a.correct_drafts:,} is more than "
                f"spec_num_proposed_drafts {a.proposed_drafts:,}")
    if a.proposed_drafts > a.verify_steps * per_step:
        return (f"spec_num_proposed_drafts {a.proposed_drafts:,} in {a.verify_steps:,} verify "
                f"step(s) is more than {source} allow")
    if a.completion_tokens > 1 + a.verify_steps + a.proposed_drafts:
        return (f"completion_tokens {a.completion_tokens:,} is more than 1 + "
                f"{a.verify_steps:,} verify steps + {a.proposed_drafts:,} proposed drafts emit")
    return None


def _histogram_problem(a: RequestAcceptance, draft_tokens: int | None) -> str | None:
    if not a.histogram:
        return None
    per_step = draft_tokens if draft_tokens is not None and draft_tokens > 0 else MAX_DRAFT_TOKENS
    if len(a.histogram) > per_step + 1:
        return (f"spec_correct_drafts_histogram has {len(a.histogram):,} entries, more than "
                f"{per_step} drafts per step allow")
    if sum(a.histogram) != a.verify_steps:
        return (f"spec_correct_drafts_histogram counts {sum(a.histogram):,} verify steps, "
                f"spec_verify_ct {a.verify_steps:,}")
    accepted = sum(k * steps for k, steps in enumerate(a.histogram))
    if accepted != a.correct_drafts:
        return (f"spec_correct_drafts_histogram accepts {accepted:,} drafts, "
                f"spec_num_correct_drafts {a.correct_drafts:,}")
    return None


def _short(value: object) -> str:
    """A value as people read it, never thousands of digits long."""
    if type(value) is int:
        if value.bit_length() > 64:
            return f"a number of ~{int(value.bit_length() * 0.30103) + 1} digits"
        return f"{value:,}"
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}…({len(text)} characters)"


def per_position_acceptance(histogram: Sequence[int],
                            positions: int | None = None) -> tuple[float, ...]:
    """P(at least j drafts accepted in a verify step) for j = 1..k, from a histogram whose
    index i holds the steps that accepted exactly i drafts.

    SGLang's histogram only reaches the most drafts any step accepted (``[41, 3]`` with 3
    drafts a step), so ``positions`` (k, the drafts per step) extends it with zeros; without
    it k is the histogram's length - 1. Position j's figure is the share of steps whose j-th
    draft was accepted: a drafter whose late positions collapse shows it here while its mean
    hides it. Empty without steps."""
    steps = sum(histogram)
    if steps <= 0:
        return ()
    k = len(histogram) - 1 if positions is None else positions
    at_least: list[float] = []
    remaining = steps
    for j in range(1, k + 1):
        remaining -= histogram[j - 1] if j - 1 < len(histogram) else 0
        at_least.append(remaining / steps)
    return tuple(at_least)


def pooled_histogram(histograms: Iterable[Sequence[int]]) -> tuple[int, ...]:
    """The element-wise sum of histograms of any lengths."""
    total: list[int] = []
    for histogram in histograms:
        if len(histogram) > len(total):
            total.extend([0] * (len(histogram) - len(total)))
        for index, count in enumerate(histogram):
            total[index] += count
    return tuple(total)


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


def _count(meta_info: Mapping[str, Any], key: str, *, required: bool = False) -> int:
    value = meta_info.get(key)
    if value is None and not required:
        return 0
    if type(value) is not int or value < 0:
        raise ValueError(f"meta_info {key} is {_short(value)}, not a count")
    return value


__all__ = [
    "IMPOSSIBLE",
    "MAX_COUNT",
    "MAX_DRAFT_TOKENS",
    "RequestAcceptance",
    "count_problem",
    "per_position_acceptance",
    "pooled_histogram",
    "request_acceptance",
    "stored_acceptance",
]

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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec


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


def request_acceptance(meta_info: Mapping[str, Any]) -> RequestAcceptance:
    """The acceptance of one ``meta_info``; ValueError names a field of the wrong type.

    A ``meta_info`` without ``spec_verify_ct`` is a request with no verify step."""
    completion = _count(meta_info, "completion_tokens", required=True)
    histogram = meta_info.get("spec_correct_drafts_histogram") or ()
    if not isinstance(histogram, list | tuple) or not all(_is_count(x) for x in histogram):
        raise ValueError(
            f"meta_info spec_correct_drafts_histogram is {histogram!r}, not a list of counts"
        )
    return RequestAcceptance(
        completion_tokens=completion,
        verify_steps=_count(meta_info, "spec_verify_ct"),
        correct_drafts=_count(meta_info, "spec_num_correct_drafts"),
        proposed_drafts=_count(meta_info, "spec_num_proposed_drafts"),
        histogram=tuple(histogram),
    )


def stored_acceptance(counts: Mapping[str, Any] | None) -> RequestAcceptance | None:
    """The acceptance a shard row stored (``ShardRow.acceptance``), None when it stored none;
    ValueError names a field that does not fit (a shard written by another tool)."""
    if counts is None:
        return None
    try:
        return msgspec.convert(counts, RequestAcceptance)
    except msgspec.ValidationError as e:
        raise ValueError(f"stored acceptance {e}") from None


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
        raise ValueError(f"meta_info {key} is {value!r}, not a count")
    return value


__all__ = [
    "RequestAcceptance",
    "per_position_acceptance",
    "pooled_histogram",
    "request_acceptance",
    "stored_acceptance",
]

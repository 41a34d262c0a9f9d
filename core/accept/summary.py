"""Acceptance of a set of replayed requests, overall and per category.

The headline figure is SpecForge's (``benchmarks/benchmarker/utils.py`` ``compute_metrics``,
what ``bench_eagle3.py`` prints and model cards publish): Σcompletion_tokens / Σspec_verify_ct
over a category's requests. It weights long answers more than the mean of per-request
figures, which is given beside it. SpecForge prints 1.0 when no request had a verify step;
here that figure is None (speculation was not on).

Repetitive output inflates acceptance (an n-gram or a drafter predicts a loop perfectly), so
outputs whose unique-bigram ratio is below 0.1 are counted as degenerate and a second figure
leaves them out.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

import msgspec

from eagle_tui.core.accept.requests import (
    MAX_COUNT,
    MAX_DRAFT_TOKENS,
    RequestAcceptance,
    per_position_acceptance,
    pooled_histogram,
)

DEGENERATE_BIGRAM_RATIO = 0.1
"""An output whose distinct bigrams are fewer than this share of its bigrams is degenerate."""


class ReplayedRequest(msgspec.Struct, frozen=True):
    """One request of a replay: which prompt (``key``, e.g. the sample id), its category,
    its acceptance, its output ids and when it ran (monotonic seconds)."""

    key: str
    category: str
    acceptance: RequestAcceptance
    output_ids: tuple[int, ...] = ()
    started_s: float = 0.0
    finished_s: float = 0.0


class CategorySummary(msgspec.Struct, frozen=True):
    """The figures of one category (or of all requests).

    ``accept_length`` is Σcompletion / Σverify (the model-card figure);
    ``mean_accept_length`` the mean of per-request figures (requests with a verify step);
    ``accept_rate`` Σcorrect / Σproposed drafts; ``per_position[j-1]`` P(at least j drafts
    accepted) over all verify steps; ``output_tokens_per_s`` Σcompletion over the span from
    the first start to the last finish; ``accept_length_without_degenerate`` the first
    figure without degenerate outputs. None where a figure has no denominator."""

    n: int
    completion_tokens: int
    verify_steps: int
    accept_length: float | None
    mean_accept_length: float | None
    accept_rate: float | None
    per_position: tuple[float, ...]
    output_tokens_per_s: float | None
    degenerate: int
    degenerate_share: float | None
    accept_length_without_degenerate: float | None


class AcceptReport(msgspec.Struct, frozen=True):
    """``overall`` and one summary per category (sorted by name)."""

    overall: CategorySummary
    categories: dict[str, CategorySummary]


def unique_bigram_ratio(ids: Sequence[int]) -> float | None:
    """Distinct bigrams / bigrams of a token sequence; None for fewer than two tokens."""
    if len(ids) < 2:
        return None
    bigrams = list(itertools.pairwise(ids))
    return len(set(bigrams)) / len(bigrams)


def is_degenerate(ids: Sequence[int]) -> bool:
    """True when the output repeats itself: unique-bigram ratio below 0.1."""
    ratio = unique_bigram_ratio(ids)
    return ratio is not None and ratio < DEGENERATE_BIGRAM_RATIO


def ratio_of_sums(acceptances: Iterable[RequestAcceptance]) -> float | None:
    """Σcompletion / Σverify (SpecForge's accept length); None when no verify step."""
    completion = verify = 0
    for acceptance in acceptances:
        completion += acceptance.completion_tokens
        verify += acceptance.verify_steps
    return completion / verify if verify else None


def summarize(requests: Sequence[ReplayedRequest]) -> CategorySummary:
    """The figures of a set of requests (see :class:`CategorySummary`)."""
    acceptances = [r.acceptance for r in requests]
    per_request = [a.accept_length for a in acceptances if a.accept_length is not None]
    proposed = sum(a.proposed_drafts for a in acceptances)
    degenerate = [is_degenerate(r.output_ids) for r in requests]
    return CategorySummary(
        n=len(requests),
        completion_tokens=sum(a.completion_tokens for a in acceptances),
        verify_steps=sum(a.verify_steps for a in acceptances),
        accept_length=ratio_of_sums(acceptances),
        mean_accept_length=sum(per_request) / len(per_request) if per_request else None,
        accept_rate=sum(a.correct_drafts for a in acceptances) / proposed if proposed else None,
        per_position=per_position_acceptance(
            pooled_histogram(a.histogram for a in acceptances), _drafts_per_step(acceptances)
        ),
        output_tokens_per_s=_throughput(requests),
        degenerate=sum(degenerate),
        degenerate_share=sum(degenerate) / len(requests) if requests else None,
        accept_length_without_degenerate=ratio_of_sums(
            a for a, bad in zip(acceptances, degenerate, strict=True) if not bad
        ),
    )


def by_category(requests: Iterable[ReplayedRequest]) -> dict[str, list[ReplayedRequest]]:
    """Requests grouped by category, categories sorted by name."""
    groups: dict[str, list[ReplayedRequest]] = defaultdict(list)
    for request in requests:
        groups[request.category].append(request)
    return dict(sorted(groups.items()))


def report(requests: Sequence[ReplayedRequest]) -> AcceptReport:
    """``overall`` over every request and a summary per category."""
    groups: Mapping[str, list[ReplayedRequest]] = by_category(requests)
    return AcceptReport(
        overall=summarize(requests),
        categories={name: summarize(group) for name, group in groups.items()},
    )


def summary_problem(name: str, s: CategorySummary) -> str | None:
    """Why ``s`` cannot be the figures of real answers (a results file written before counts
    were checked, or edited), else None: the checks of ``count_problem`` on the sums, and
    every figure the one its sums give."""
    if s.verify_steps > s.completion_tokens or s.completion_tokens > s.n * MAX_COUNT:
        return (f"{name}: {s.verify_steps:,} verify steps for {s.completion_tokens:,} "
                f"completion tokens of {s.n} request(s)")
    expected = s.completion_tokens / s.verify_steps if s.verify_steps else None
    if not _same(s.accept_length, expected):
        return f"{name}: accept_length {s.accept_length!r} is not {expected!r} (its sums')"
    rates = [s.accept_rate, *s.per_position]
    if len(s.per_position) > MAX_DRAFT_TOKENS or any(
            r is not None and not 0.0 <= r <= 1.0 for r in rates):
        return f"{name}: an accept rate or P(>=j) outside 0..1"
    return None


def _same(value: float | None, expected: float | None) -> bool:
    if value is None or expected is None:
        return value is expected
    return math.isclose(value, expected, rel_tol=1e-9)


def _drafts_per_step(acceptances: Sequence[RequestAcceptance]) -> int | None:
    known = [a.drafts_per_step for a in acceptances if a.drafts_per_step is not None]
    return max(known) if known else None


def _throughput(requests: Sequence[ReplayedRequest]) -> float | None:
    if not requests:
        return None
    span = max(r.finished_s for r in requests) - min(r.started_s for r in requests)
    completion = sum(r.acceptance.completion_tokens for r in requests)
    return completion / span if span > 0 else None


__all__ = [
    "DEGENERATE_BIGRAM_RATIO",
    "AcceptReport",
    "CategorySummary",
    "ReplayedRequest",
    "by_category",
    "is_degenerate",
    "ratio_of_sums",
    "report",
    "summarize",
    "summary_problem",
    "unique_bigram_ratio",
]

"""A/B: the difference in accept length between two servers, with a bootstrap interval.

The statistic is B's Σcompletion/Σverify minus A's, per category. Its 95 % interval is the
percentile bootstrap over requests: resample the requests with replacement, recompute both
figures, take the 2.5th and 97.5th percentiles of the differences. When both sides replayed
the same prompts (the same keys), a prompt is resampled on both sides at once (paired), which
removes the prompt-to-prompt spread from the interval; otherwise each side is resampled on its
own. The generator is seeded, so a run is repeatable.

Below :data:`MIN_REQUESTS` requests on a side there is no interval and no verdict: one
request per side resamples to itself every time (a zero-width "interval" that would call any
difference supported), and a handful gives too few distinct resamples for a 2.5 % tail.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import msgspec

from eagle_tui.core.accept.summary import ReplayedRequest, by_category, ratio_of_sums

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 21
CONFIDENCE = 0.95
MIN_REQUESTS = 6
"""Fewest requests per side (per category) for an interval: n requests resample into
C(2n-1, n) distinct draws, 462 at n = 6, so each 2.5 % tail holds at least ~10 of them
(at n = 3 there are 10 in all)."""


class Difference(msgspec.Struct, frozen=True):
    """B minus A with its interval; ``paired`` when the same prompts were resampled on both
    sides. ``low``/``high`` are None when a side has fewer than ``min_requests`` requests
    (``a_n``, ``b_n``; then nothing is resampled) or too few resamples had a figure on both
    sides."""

    a: float
    b: float
    difference: float
    low: float | None
    high: float | None
    resamples: int
    paired: bool
    a_n: int = 0
    b_n: int = 0
    min_requests: int = MIN_REQUESTS

    @property
    def too_few(self) -> bool:
        """True when a side has too few requests for an interval."""
        return min(self.a_n, self.b_n) < self.min_requests


def bootstrap_difference(
    a: Sequence[ReplayedRequest],
    b: Sequence[ReplayedRequest],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Difference | None:
    """B's accept length minus A's with a 95 % percentile-bootstrap interval; None when
    either side has no verify step at all."""
    a_figure = ratio_of_sums(r.acceptance for r in a)
    b_figure = ratio_of_sums(r.acceptance for r in b)
    if a_figure is None or b_figure is None:
        return None
    pairs = _pairs(a, b)
    rng = random.Random(seed)
    if min(len(a), len(b)) < MIN_REQUESTS:
        resamples = 0
        draws: list[float | None] = []
    elif pairs is not None:
        draws = [_paired_draw(pairs, rng) for _ in range(resamples)]
    else:
        a_columns, b_columns = _columns(a), _columns(b)
        draws = [_independent_draw(a_columns, b_columns, rng) for _ in range(resamples)]
    low, high = _percentiles([d for d in draws if d is not None])
    return Difference(
        a=a_figure,
        b=b_figure,
        difference=b_figure - a_figure,
        low=low,
        high=high,
        resamples=resamples,
        paired=pairs is not None,
        a_n=len(a),
        b_n=len(b),
    )


def differences_by_category(
    a: Sequence[ReplayedRequest],
    b: Sequence[ReplayedRequest],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict[str, Difference | None]:
    """:func:`bootstrap_difference` for every category either side has (None where one side
    lacks it or has no verify step)."""
    a_groups, b_groups = by_category(a), by_category(b)
    return {
        name: bootstrap_difference(
            a_groups.get(name, []), b_groups.get(name, []), resamples=resamples, seed=seed
        )
        for name in sorted(set(a_groups) | set(b_groups))
    }


Columns = tuple[list[int], list[int]]  # completion tokens and verify steps, one per request


def _columns(requests: Sequence[ReplayedRequest]) -> Columns:
    return ([r.acceptance.completion_tokens for r in requests],
            [r.acceptance.verify_steps for r in requests])


def _pairs(a: Sequence[ReplayedRequest], b: Sequence[ReplayedRequest]) -> (
        tuple[Columns, Columns] | None):
    """Both sides' columns in the same prompt order when both replayed exactly the same keys
    once each."""
    a_keys, b_keys = {r.key: r for r in a}, {r.key: r for r in b}
    if len(a_keys) != len(a) or len(b_keys) != len(b) or a_keys.keys() != b_keys.keys():
        return None
    order = sorted(a_keys)
    return _columns([a_keys[k] for k in order]), _columns([b_keys[k] for k in order])


def _drawn_ratio(columns: Columns, drawn: list[int]) -> float | None:
    completion, verify = columns
    steps = sum(map(verify.__getitem__, drawn))
    return sum(map(completion.__getitem__, drawn)) / steps if steps else None


def _draw(size: int, rng: random.Random) -> list[int]:
    return rng.choices(range(size), k=size)


def _paired_draw(pairs: tuple[Columns, Columns], rng: random.Random) -> float | None:
    drawn = _draw(len(pairs[0][0]), rng)
    a, b = _drawn_ratio(pairs[0], drawn), _drawn_ratio(pairs[1], drawn)
    return None if a is None or b is None else b - a


def _independent_draw(a: Columns, b: Columns, rng: random.Random) -> float | None:
    a_ratio = _drawn_ratio(a, _draw(len(a[0]), rng))
    b_ratio = _drawn_ratio(b, _draw(len(b[0]), rng))
    return None if a_ratio is None or b_ratio is None else b_ratio - a_ratio


def _percentiles(draws: list[float]) -> tuple[float | None, float | None]:
    """The central ``CONFIDENCE`` interval of the draws (nearest rank); None with under 20."""
    if len(draws) < 20:
        return None, None
    draws.sort()
    tail = (1.0 - CONFIDENCE) / 2
    last = len(draws) - 1
    return draws[round(tail * last)], draws[round((1.0 - tail) * last)]


__all__ = [
    "CONFIDENCE",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "MIN_REQUESTS",
    "Difference",
    "bootstrap_difference",
    "differences_by_category",
]

"""A/B: the difference in accept length between two servers, with a bootstrap interval.

The statistic is B's Σcompletion/Σverify minus A's, per category. Its 95 % interval is the
percentile bootstrap over requests: resample the requests with replacement, recompute both
figures, take the 2.5th and 97.5th percentiles of the differences. When both sides replayed
the same prompts (the same keys), a prompt is resampled on both sides at once (paired), which
removes the prompt-to-prompt spread from the interval; otherwise each side is resampled on its
own. The generator is seeded, so a run is repeatable.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import msgspec

from eagle_tui.core.accept.summary import ReplayedRequest, by_category, ratio_of_sums

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 21
CONFIDENCE = 0.95


class Difference(msgspec.Struct, frozen=True):
    """B minus A with its interval; ``paired`` when the same prompts were resampled on both
    sides. ``low``/``high`` are None when too few resamples had a figure on both sides."""

    a: float
    b: float
    difference: float
    low: float | None
    high: float | None
    resamples: int
    paired: bool


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
    if pairs is not None:
        draws = [_paired_draw(pairs, rng) for _ in range(resamples)]
    else:
        draws = [_independent_draw(a, b, rng) for _ in range(resamples)]
    low, high = _percentiles([d for d in draws if d is not None])
    return Difference(
        a=a_figure,
        b=b_figure,
        difference=b_figure - a_figure,
        low=low,
        high=high,
        resamples=resamples,
        paired=pairs is not None,
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


Sums = tuple[int, int]  # (completion tokens, verify steps) of one request


def _sums(request: ReplayedRequest) -> Sums:
    return request.acceptance.completion_tokens, request.acceptance.verify_steps


def _pairs(a: Sequence[ReplayedRequest], b: Sequence[ReplayedRequest]) -> (
        list[tuple[Sums, Sums]] | None):
    """Each prompt's sums on both sides when both replayed exactly the same keys once."""
    a_keys, b_keys = {r.key: r for r in a}, {r.key: r for r in b}
    if len(a_keys) != len(a) or len(b_keys) != len(b) or a_keys.keys() != b_keys.keys():
        return None
    return [(_sums(a_keys[key]), _sums(b_keys[key])) for key in sorted(a_keys)]


def _ratio(sums: Sequence[Sums]) -> float | None:
    verify = sum(v for _, v in sums)
    return sum(c for c, _ in sums) / verify if verify else None


def _paired_draw(pairs: Sequence[tuple[Sums, Sums]], rng: random.Random) -> float | None:
    drawn = rng.choices(pairs, k=len(pairs))
    a, b = _ratio([p[0] for p in drawn]), _ratio([p[1] for p in drawn])
    return None if a is None or b is None else b - a


def _independent_draw(a: Sequence[ReplayedRequest], b: Sequence[ReplayedRequest],
                      rng: random.Random) -> float | None:
    a_ratio = _ratio([_sums(r) for r in rng.choices(a, k=len(a))])
    b_ratio = _ratio([_sums(r) for r in rng.choices(b, k=len(b))])
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
    "Difference",
    "bootstrap_difference",
    "differences_by_category",
]

"""The windowed accept length from SGLang's Prometheus counters (``--enable-metrics``).

SGLang 0.5.23 (``observe_one_finished_request``) adds a finished request's completion tokens
to ``sglang:generation_tokens_total`` and its verify steps to
``sglang:spec_verify_calls_total`` (a series that exists only with speculation, once a request
had a verify step). Between two scrapes, Δgeneration_tokens / Δverify_calls is therefore
Σcompletion / Σverify over the requests that finished in between: SpecForge's figure, for the
live traffic. The ``sglang:spec_accept_length`` gauge is only the last decode-log interval.

Counters restart at zero when the server does; the increase over a window is Prometheus'
``increase()``: a value lower than the one before counts from zero.

The window's accept rate comes from the same counters: a request's completion is its prefill
token plus, per verify step, the bonus token and the accepted drafts, so accepted drafts =
Δgeneration_tokens - Δverify_calls - Δrequests, proposed = Δverify_calls x (draft tokens - 1).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Mapping, Sequence

import msgspec

from eagle_tui.core.accept.figures import AcceptFigure, window_text
from eagle_tui.core.sglang.client import parse_prometheus

GENERATION_TOKENS = "sglang:generation_tokens_total"
VERIFY_CALLS = "sglang:spec_verify_calls_total"
FINISHED_REQUESTS = "sglang:num_requests_total"


class CounterSample(msgspec.Struct, frozen=True):
    """The counters of one ``/metrics`` scrape at ``at_s`` (monotonic seconds), summed over
    their labels; ``verify_calls`` is None when the series is absent (no speculation, or no
    verify step yet)."""

    at_s: float
    generation_tokens: float
    verify_calls: float | None = None
    requests: float | None = None


def counter_sample(series: Mapping[str, float], at_s: float) -> CounterSample | None:
    """The sample in a parsed scrape (``SGLangClient.metrics()``); None without
    ``sglang:generation_tokens_total`` (metrics off, or not SGLang)."""
    generation = series.get(GENERATION_TOKENS)
    if generation is None:
        return None
    return CounterSample(
        at_s=at_s,
        generation_tokens=generation,
        verify_calls=series.get(VERIFY_CALLS),
        requests=series.get(FINISHED_REQUESTS),
    )


def scrape_sample(text: str, at_s: float) -> CounterSample | None:
    """:func:`counter_sample` of a raw ``/metrics`` body."""
    return counter_sample(parse_prometheus(text), at_s)


def increase(values: Sequence[float]) -> float:
    """How much a counter grew over consecutive readings, across restarts: a reading lower
    than the previous one means the counter started again from zero."""
    grown = 0.0
    for before, after in itertools.pairwise(values):
        grown += after - before if after >= before else after
    return grown


def windowed_figure(samples: Sequence[CounterSample], *,
                    draft_tokens: int | None = None) -> AcceptFigure | None:
    """Δgeneration_tokens / Δverify_calls over consecutive samples (oldest first); None
    with fewer than two samples or no verify step in between. An absent verify series reads
    as 0 (it appears with the first verify step)."""
    if len(samples) < 2:
        return None
    tokens = increase([s.generation_tokens for s in samples])
    verify = increase([s.verify_calls or 0.0 for s in samples])
    if verify <= 0:
        return None
    span = samples[-1].at_s - samples[0].at_s
    return AcceptFigure(
        accept_length=tokens / verify,
        source="metrics",
        window=window_text(round(span)),
        window_s=span,
        accept_rate=_accept_rate(samples, tokens, verify, draft_tokens),
        basis=f"Δ{tokens:,.0f} generation tokens / Δ{verify:,.0f} verify calls",
    )


def _accept_rate(samples: Sequence[CounterSample], tokens: float, verify: float,
                 draft_tokens: int | None) -> float | None:
    if draft_tokens is None or draft_tokens < 2 or any(s.requests is None for s in samples):
        return None
    requests = increase([s.requests or 0.0 for s in samples])
    accepted = tokens - verify - requests
    return max(0.0, accepted) / (verify * (draft_tokens - 1))


class MetricsWindow:
    """Scrapes kept over a sliding window, for a live figure: ``add`` each scrape's
    sample, ask ``figure()``. The oldest sample kept is the last one at or before the
    window's start, so the figure spans the whole window once it has run that long."""

    def __init__(self, window_s: float) -> None:
        if window_s <= 0:
            raise ValueError(f"a metrics window must be positive, not {window_s}")
        self.window_s = window_s
        self._samples: deque[CounterSample] = deque()

    def add(self, sample: CounterSample) -> None:
        """Keep a scrape (samples must come in time order) and drop what the window left."""
        if self._samples and sample.at_s < self._samples[-1].at_s:
            raise ValueError("metrics samples must come in time order")
        self._samples.append(sample)
        start = sample.at_s - self.window_s
        while len(self._samples) > 1 and self._samples[1].at_s <= start:
            self._samples.popleft()

    @property
    def samples(self) -> tuple[CounterSample, ...]:
        """The samples the figure is computed over, oldest first."""
        return tuple(self._samples)

    def figure(self, *, draft_tokens: int | None = None) -> AcceptFigure | None:
        """:func:`windowed_figure` over the window."""
        return windowed_figure(self.samples, draft_tokens=draft_tokens)


__all__ = [
    "FINISHED_REQUESTS",
    "GENERATION_TOKENS",
    "VERIFY_CALLS",
    "CounterSample",
    "MetricsWindow",
    "counter_sample",
    "increase",
    "scrape_sample",
    "windowed_figure",
]

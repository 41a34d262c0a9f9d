"""The windowed accept length from real SGLang 0.5.23 ``/metrics`` scrapes, checked against
the answers that finished between them (recomputed here from the raw bodies)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from accept_recorded import NO_SPEC, PHASES, SPEC, in_phases, metrics_text, series_value

from eagle_tui.core.accept.window import (
    GENERATION_TOKENS,
    VERIFY_CALLS,
    CounterSample,
    MetricsWindow,
    increase,
    scrape_sample,
    windowed_figure,
)
from eagle_tui.core.sglang.client import parse_prometheus

SNAPSHOTS = ("before", *(f"after_{p}" for p in PHASES))


def sample(when: str, at_s: float, folder: Path = SPEC) -> CounterSample:
    found = scrape_sample(metrics_text(when, folder), at_s)
    assert found is not None
    return found


def test_the_scrape_reads_the_counters_summed_over_their_labels() -> None:
    for when in SNAPSHOTS:
        text = metrics_text(when)
        found = sample(when, 0.0)
        assert found.generation_tokens == series_value(text, GENERATION_TOKENS)
        assert found.verify_calls == series_value(text, VERIFY_CALLS)


@pytest.mark.parametrize(("first", "last"), list(itertools.combinations(range(len(PHASES) + 1), 2)))
def test_the_window_is_the_sum_of_completion_over_the_sum_of_verify_of_what_finished(
        first: int, last: int) -> None:
    """Between any two scrapes: Δgeneration_tokens / Δverify_calls is Σcompletion / Σverify
    of exactly the requests that finished in between (the bench_eagle3 figure)."""
    figure = windowed_figure([sample(SNAPSHOTS[first], 0.0), sample(SNAPSHOTS[last], 30.0)])
    finished = in_phases(*PHASES[first:last])
    completion = sum(e.meta["completion_tokens"] for e in finished)
    verify = sum(e.meta["spec_verify_ct"] for e in finished)
    assert figure is not None
    assert figure.accept_length == pytest.approx(completion / verify, rel=1e-12)
    assert figure.source == "metrics" and figure.window == "last 30 s" and figure.window_s == 30
    assert f"Δ{completion:,} generation tokens / Δ{verify:,} verify calls" == figure.basis


@pytest.mark.parametrize("phase", PHASES)
def test_the_windows_accept_rate_comes_from_the_counters(phase: str) -> None:
    """Accepted drafts = Δtokens - Δverify - Δrequests: exact for answers that stopped on
    their own (chat), short by what was cut at max_new_tokens for the others."""
    before = SNAPSHOTS[PHASES.index(phase)]
    figure = windowed_figure([sample(before, 0.0), sample(f"after_{phase}", 1.0)],
                             draft_tokens=4)
    finished = in_phases(phase)
    correct = sum(e.meta["spec_num_correct_drafts"] for e in finished)
    proposed = sum(e.meta["spec_num_proposed_drafts"] for e in finished)
    surplus = sum(1 + e.meta["spec_verify_ct"] + e.meta["spec_num_correct_drafts"]
                  - e.meta["completion_tokens"] for e in finished)
    assert figure is not None and figure.accept_rate is not None
    assert figure.accept_rate * proposed == pytest.approx(correct - surplus)
    if phase == "chat":
        assert surplus == 0 and figure.accept_rate == pytest.approx(correct / proposed)


def test_without_the_draft_count_or_the_request_counter_there_is_no_window_rate() -> None:
    pair = [sample("before", 0.0), sample("after_chat", 1.0)]
    bare = [CounterSample(s.at_s, s.generation_tokens, s.verify_calls) for s in pair]
    for figure in (windowed_figure(pair), windowed_figure(bare, draft_tokens=4)):
        assert figure is not None and figure.accept_rate is None


def test_flush_cache_leaves_the_counters_alone() -> None:
    figure = windowed_figure([sample("after_busy_flush", 0.0), sample("after_idle_flush", 1.0)])
    assert figure is None  # nothing finished in between, and nothing was reset


def test_without_speculation_the_gauges_read_zero_and_the_counter_is_absent() -> None:
    for when in ("before", "after_chat", "after_cycle42"):
        series = parse_prometheus(metrics_text(when, NO_SPEC))
        assert VERIFY_CALLS not in series
        assert series[GENERATION_TOKENS] > 0
        for gauge in ("sglang:spec_accept_length", "sglang:spec_accept_rate",
                      "sglang:spec_num_steps", "sglang:spec_num_draft_tokens"):
            assert series[gauge] == 0.0
    samples = [sample("before", 0.0, NO_SPEC), sample("after_cycle42", 1.0, NO_SPEC)]
    assert samples[1].verify_calls is None
    assert windowed_figure(samples) is None


def test_a_scrape_without_sglangs_counters_gives_no_sample() -> None:
    assert scrape_sample("# HELP x\nother_total 3\n", 0.0) is None


def test_a_restart_is_a_counter_reset_not_a_negative_window() -> None:
    """Scrapes, a restart, then the new server's first requests (its counters from 0)."""
    a, b = sample("after_chat", 0.0), sample("after_cycle42", 10.0)
    restarted = sample("after_chat", 20.0)  # the new process served the same chat phase
    figure = windowed_figure([a, b, restarted])
    tokens = (b.generation_tokens - a.generation_tokens) + restarted.generation_tokens
    verify = ((b.verify_calls or 0) - (a.verify_calls or 0)) + (restarted.verify_calls or 0)
    assert figure is not None and figure.accept_length == pytest.approx(tokens / verify)


def test_increase_counts_from_zero_after_a_drop() -> None:
    assert increase([5, 9, 2, 6]) == (9 - 5) + 2 + (6 - 2)
    assert increase([3]) == 0 and increase([]) == 0


def test_the_sliding_window_keeps_one_scrape_before_its_start() -> None:
    scrapes = [sample(when, 10.0 * i) for i, when in enumerate(SNAPSHOTS)]
    window = MetricsWindow(25.0)
    for scrape in scrapes:
        window.add(scrape)
    kept = window.samples
    assert kept[-1] == scrapes[-1]
    assert kept[0].at_s <= scrapes[-1].at_s - 25.0 < kept[1].at_s
    figure = window.figure()
    assert figure == windowed_figure(kept)
    assert figure is not None and figure.window_s == kept[-1].at_s - kept[0].at_s


def test_the_window_refuses_samples_out_of_order_and_a_non_positive_length() -> None:
    window = MetricsWindow(60.0)
    window.add(sample("after_chat", 5.0))
    with pytest.raises(ValueError, match="time order"):
        window.add(sample("after_cycle42", 4.0))
    with pytest.raises(ValueError, match="positive"):
        MetricsWindow(0)
    assert MetricsWindow(60.0).figure() is None

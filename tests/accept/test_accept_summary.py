"""Per-category figures of a replay, on real SGLang 0.5.23 NGRAM answers; every expected
value is recomputed here from the raw ``/generate`` bodies."""

from __future__ import annotations

import math
from collections import defaultdict

import msgspec
import pytest
from accept_recorded import NO_SPEC, Exchange, exchanges, in_phases, replayed

from eagle_tui.core.accept.summary import (
    AcceptReport,
    is_degenerate,
    report,
    summarize,
    unique_bigram_ratio,
)

RECORDED = list(exchanges())


def by_category(items: list[Exchange]) -> dict[str, list[Exchange]]:
    groups: dict[str, list[Exchange]] = defaultdict(list)
    for item in items:
        groups[item.category].append(item)
    return groups


def bigram_ratio(ids: list[int]) -> float:
    pairs = [(ids[i], ids[i + 1]) for i in range(len(ids) - 1)]
    return len(set(pairs)) / len(pairs)


def test_a_categorys_accept_length_is_specforges_sum_of_completion_over_sum_of_verify() -> None:
    result = report(replayed(RECORDED))
    groups = by_category(RECORDED)
    assert set(result.categories) == set(groups)
    for name, items in groups.items():
        figures = result.categories[name]
        completion = sum(e.meta["completion_tokens"] for e in items)
        verify = sum(e.meta["spec_verify_ct"] for e in items)
        assert figures.n == len(items)
        assert figures.accept_length == pytest.approx(completion / verify, rel=1e-12)
        per_request = [e.meta["spec_accept_length"] for e in items]
        assert figures.mean_accept_length == pytest.approx(sum(per_request) / len(items))
        correct = sum(e.meta["spec_num_correct_drafts"] for e in items)
        proposed = sum(e.meta["spec_num_proposed_drafts"] for e in items)
        assert figures.accept_rate == pytest.approx(correct / proposed, rel=1e-12)
    overall = result.overall
    assert overall.n == len(RECORDED)
    assert overall.accept_length == pytest.approx(
        sum(e.meta["completion_tokens"] for e in RECORDED)
        / sum(e.meta["spec_verify_ct"] for e in RECORDED), rel=1e-12)


def test_the_two_means_differ_where_answers_differ_in_length() -> None:
    """chat: one cold answer of 1.125 and five of 4.5 (all 9 tokens): the ratio of sums
    weights the cold answer's 8 verify steps, the mean weights every answer once."""
    chat = summarize(replayed(in_phases("chat")))
    assert chat.accept_length is not None and chat.mean_accept_length is not None
    assert chat.accept_length < chat.mean_accept_length
    assert not math.isclose(chat.accept_length, chat.mean_accept_length, rel_tol=0.05)


def test_per_position_acceptance_pools_every_verify_step_of_a_category() -> None:
    for name, items in by_category(RECORDED).items():
        figures = summarize(replayed(items))
        steps = sum(e.meta["spec_verify_ct"] for e in items)
        correct = sum(e.meta["spec_num_correct_drafts"] for e in items)
        assert len(figures.per_position) == 3, name
        assert sum(figures.per_position) * steps == pytest.approx(correct), name


def test_repetitive_output_is_counted_and_left_out_of_the_second_figure() -> None:
    """The recorded 480-token answer on the 42-token cycle repeats itself (NGRAM accepts 4.0
    per step); the 64-token ones on the same cycle do not count as degenerate."""
    items = RECORDED
    degenerate = [e for e in items if bigram_ratio(e.output_ids) < 0.1]
    assert {e.key for e in degenerate} == {"repeat-5", "busy-flush"}
    result = summarize(replayed(items))
    assert result.degenerate == len(degenerate)
    assert result.degenerate_share == pytest.approx(len(degenerate) / len(items))
    kept = [e for e in items if e not in degenerate]
    expected = (sum(e.meta["completion_tokens"] for e in kept)
                / sum(e.meta["spec_verify_ct"] for e in kept))
    assert result.accept_length_without_degenerate == pytest.approx(expected, rel=1e-12)
    assert result.accept_length is not None and expected < result.accept_length


@pytest.mark.parametrize("exchange", RECORDED, ids=lambda e: e.key)
def test_unique_bigram_ratio(exchange: Exchange) -> None:
    ids = exchange.output_ids
    assert unique_bigram_ratio(ids) == pytest.approx(bigram_ratio(ids))
    assert is_degenerate(ids) == (bigram_ratio(ids) < 0.1)


def test_too_short_an_output_has_no_bigram_ratio_and_is_not_degenerate() -> None:
    assert unique_bigram_ratio([]) is None and unique_bigram_ratio([7]) is None
    assert not is_degenerate([7])
    assert unique_bigram_ratio([7, 7, 7]) == 0.5


def test_output_tokens_per_second_spans_first_start_to_last_finish() -> None:
    items = in_phases("cycle280")  # four at once
    figures = summarize(replayed(items))
    span = max(e.finished_s for e in items) - min(e.started_s for e in items)
    assert figures.output_tokens_per_s == pytest.approx(
        sum(len(e.output_ids) for e in items) / span)


def test_without_speculation_there_is_no_accept_length() -> None:
    """SpecForge prints 1.0 when no request had a verify step; here the figure is absent."""
    result = report(replayed(list(exchanges(NO_SPEC))))
    for figures in [result.overall, *result.categories.values()]:
        assert figures.n > 0 and figures.completion_tokens > 0
        assert figures.verify_steps == 0
        assert figures.accept_length is None and figures.mean_accept_length is None
        assert figures.accept_rate is None and figures.per_position == ()


def test_an_empty_set_has_no_figures() -> None:
    empty = summarize([])
    assert empty.n == 0 and empty.accept_length is None
    assert empty.output_tokens_per_s is None and empty.degenerate_share is None


def test_a_report_round_trips_through_json() -> None:
    result = report(replayed(RECORDED))
    again = msgspec.json.decode(msgspec.json.encode(result), type=AcceptReport)
    assert again == result

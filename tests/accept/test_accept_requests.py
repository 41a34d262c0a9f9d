"""Per-request acceptance against real SGLang 0.5.23 NGRAM answers."""

from __future__ import annotations

import math

import pytest
from accept_recorded import NO_SPEC, Exchange, exchanges

from eagle_tui.core.accept.requests import (
    RequestAcceptance,
    per_position_acceptance,
    pooled_histogram,
    request_acceptance,
)

RECORDED = exchanges()


@pytest.mark.parametrize("exchange", RECORDED, ids=lambda e: e.key)
def test_figures_are_sglangs_own(exchange: Exchange) -> None:
    meta = exchange.meta
    acceptance = request_acceptance(meta)
    assert acceptance.accept_length == pytest.approx(meta["spec_accept_length"], rel=1e-12)
    assert acceptance.accept_rate == pytest.approx(meta["spec_accept_rate"], rel=1e-12)
    assert acceptance.verify_steps == meta["spec_verify_ct"]
    assert acceptance.completion_tokens == len(exchange.output_ids) == meta["completion_tokens"]


@pytest.mark.parametrize("exchange", RECORDED, ids=lambda e: e.key)
def test_per_position_acceptance_adds_up_to_the_accepted_drafts(exchange: Exchange) -> None:
    """Σ_j P(at least j accepted) is the mean number of drafts accepted per step, so times
    the verify steps it is SGLang's spec_num_correct_drafts; the histogram counts every step."""
    meta = exchange.meta
    acceptance = request_acceptance(meta)
    histogram = meta.get("spec_correct_drafts_histogram", [])
    assert sum(histogram) == meta["spec_verify_ct"]
    positions = acceptance.per_position
    assert len(positions) == meta["spec_num_proposed_drafts"] // meta["spec_verify_ct"] == 3
    assert math.isclose(sum(positions) * meta["spec_verify_ct"], meta["spec_num_correct_drafts"])
    assert list(positions) == sorted(positions, reverse=True)  # P(≥ j) never grows with j


def test_a_short_histogram_is_extended_to_every_draft_position() -> None:
    """SGLang stops the histogram at the most drafts any step accepted ([41, 3] with 3 drafts
    per step): positions 2 and 3 were never reached, so their share is 0, not missing."""
    exchange = next(e for e in RECORDED if e.meta.get("spec_correct_drafts_histogram") == [41, 3])
    positions = request_acceptance(exchange.meta).per_position
    assert positions == (3 / 44, 0.0, 0.0)
    assert per_position_acceptance([41, 3]) == (3 / 44,)  # k unknown: only what the list says


def test_an_answer_without_speculation_has_no_verify_step() -> None:
    for exchange in exchanges(NO_SPEC):
        acceptance = request_acceptance(exchange.meta)
        assert not any(key.startswith("spec_") for key in exchange.meta)
        assert acceptance.verify_steps == 0
        assert acceptance.completion_tokens == exchange.meta["completion_tokens"]
        assert acceptance.accept_length is None and acceptance.accept_rate is None
        assert acceptance.per_position == () and acceptance.drafts_per_step is None


@pytest.mark.parametrize(
    ("field", "value"),
    [("completion_tokens", None), ("completion_tokens", "9"), ("spec_verify_ct", -1),
     ("spec_num_correct_drafts", 1.5), ("spec_correct_drafts_histogram", [0, "2"]),
     ("spec_correct_drafts_histogram", {"0": 2})],
)
def test_a_field_of_the_wrong_type_is_named(field: str, value: object) -> None:
    meta = dict(RECORDED[1].meta)
    meta[field] = value
    with pytest.raises(ValueError, match=field):
        request_acceptance(meta)


def test_pooled_histograms_of_different_lengths_add_position_by_position() -> None:
    histograms = [e.meta["spec_correct_drafts_histogram"] for e in RECORDED]
    pooled = pooled_histogram(histograms)
    assert len(pooled) == max(len(h) for h in histograms)
    for index, count in enumerate(pooled):
        assert count == sum(h[index] for h in histograms if index < len(h))


def test_empty_histograms_give_no_positions() -> None:
    assert per_position_acceptance([]) == ()
    assert per_position_acceptance([0, 0], 3) == ()
    assert RequestAcceptance(completion_tokens=1).per_position == ()

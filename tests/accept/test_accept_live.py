"""The speculative config and lifetime figure of real ``/server_info`` answers, the choice of
a live figure by source, and the 1.00 alarm."""

from __future__ import annotations

import pytest
from accept_recorded import NO_SPEC, decode_lines, in_phases, metrics_text, server_info

from eagle_tui.core.accept.alarms import stuck_at_one, tokens_per_step
from eagle_tui.core.accept.config import SpecConfig, lifetime_figure, spec_config
from eagle_tui.core.accept.decodelog import DecodeLogWindow, points_from_log
from eagle_tui.core.accept.figures import AcceptFigure, best_figure
from eagle_tui.core.accept.live import live_acceptance
from eagle_tui.core.accept.window import CounterSample, MetricsWindow, scrape_sample


def metrics_window(*whens: str) -> MetricsWindow:
    window = MetricsWindow(3600.0)
    for at, when in enumerate(whens):
        found = scrape_sample(metrics_text(when), float(at))
        assert found is not None
        window.add(found)
    return window


def test_the_config_is_what_the_server_runs_with() -> None:
    info = server_info("before")
    state = info["internal_states"][0]
    config = spec_config(info)
    assert config == SpecConfig(
        algorithm=state["speculative_algorithm"],
        num_steps=state["speculative_num_steps"],
        eagle_topk=state["speculative_eagle_topk"],
        num_draft_tokens=state["speculative_num_draft_tokens"],
        draft_model_path=info["speculative_draft_model_path"],
    )
    assert config.enabled and config.algorithm == "NGRAM" and config.draft_model_path is None
    assert config.summary == "NGRAM, 4 draft tokens, 4 steps, topk 1"


def test_without_speculation_the_config_is_off() -> None:
    info = server_info("after_cycle42", NO_SPEC)
    assert info["speculative_algorithm"] is None
    config = spec_config(info)
    assert not config.enabled and config.summary == "off"
    assert lifetime_figure(info) is None
    assert live_acceptance(info).figure is None


def test_the_config_falls_back_to_the_server_arguments_and_reads_a_draft_path() -> None:
    info = server_info("before")
    bare = {k: v for k, v in info.items() if k != "internal_states"}
    bare["speculative_draft_model_path"] = "/models/kimi-k2.5-eagle3"
    config = spec_config(bare)
    assert config.algorithm == info["speculative_algorithm"]
    assert config.draft_model_path == "/models/kimi-k2.5-eagle3"
    assert not spec_config({"internal_states": "broken", "speculative_algorithm": "none"}).enabled


@pytest.mark.parametrize("when", ["before", "after_chat", "after_cycle42", "after_repeat",
                                  "after_busy_flush"])
def test_the_lifetime_figure_is_avg_spec_accept_length(when: str) -> None:
    info = server_info(when)
    figure = lifetime_figure(info)
    assert figure is not None
    assert figure.accept_length == info["internal_states"][0]["avg_spec_accept_length"]
    assert (figure.source, figure.window, figure.window_s) == ("lifetime", "lifetime", None)


def test_flush_cache_resets_the_lifetime_figure_only_when_idle() -> None:
    assert lifetime_figure(server_info("after_busy_flush")) is not None  # refused while busy
    assert lifetime_figure(server_info("after_idle_flush")) is None


def test_the_lifetime_figure_is_not_the_model_card_figure() -> None:
    """After the chat phase the lifetime average (warm-up included, prefill token left out)
    reads well below chat's own Σcompletion/Σverify."""
    lifetime = lifetime_figure(server_info("after_chat"))
    chat = in_phases("chat")
    ratio = (sum(e.meta["completion_tokens"] for e in chat)
             / sum(e.meta["spec_verify_ct"] for e in chat))
    assert lifetime is not None and lifetime.accept_length < ratio - 0.5


def test_the_lifetime_figure_of_several_ranks_is_their_mean() -> None:
    info = server_info("after_chat")
    rank = info["internal_states"][0]
    info["internal_states"] = [rank, {**rank, "avg_spec_accept_length": 3.0}]
    figure = lifetime_figure(info)
    assert figure is not None and "2 DP ranks" in figure.basis
    assert figure.accept_length == pytest.approx((rank["avg_spec_accept_length"] + 3.0) / 2)


def test_the_live_figure_prefers_metrics_then_the_log_then_the_lifetime() -> None:
    info = server_info("after_cycle42")
    metrics = metrics_window("after_chat", "after_cycle42")
    log = DecodeLogWindow(3600.0)
    for point in points_from_log(decode_lines()):
        log.add(point)
    with_all = live_acceptance(info, metrics=metrics, log=log)
    assert with_all.figure == metrics.figure(draft_tokens=4)
    assert with_all.figure is not None and with_all.figure.accept_rate is not None
    assert live_acceptance(info, log=log).figure == log.figure()
    lifetime = live_acceptance(info).figure
    assert lifetime == lifetime_figure(info)
    empty = live_acceptance(info, metrics=MetricsWindow(60.0), log=DecodeLogWindow(60.0))
    assert empty.figure == lifetime  # windows with nothing in them fall through
    assert best_figure(None, None) is None


def test_a_window_in_which_no_draft_was_accepted_raises_the_one_point_zero_alarm() -> None:
    """A fresh server's counters (0) to the scrape after its warm-up request, which accepted
    no draft: 8 tokens / 7 verify steps by the counters (the prefill token counts), exactly
    1.00 per step without it."""
    fresh = CounterSample(at_s=0.0, generation_tokens=0.0, verify_calls=None, requests=0.0)
    warmed = scrape_sample(metrics_text("before"), 10.0)
    assert warmed is not None
    window = MetricsWindow(60.0)
    window.add(fresh)
    window.add(warmed)
    info = server_info("before")
    live = live_acceptance(info, metrics=window)
    assert live.figure is not None and live.figure.accept_length == pytest.approx(8 / 7)
    assert tokens_per_step(live.figure, live.config) == 1.0
    assert live.alarm is not None and live.alarm.kind == "stuck_at_one"
    assert "check --speculative-algorithm" in live.alarm.next_step
    assert "EAGLE3 draft under EAGLE" in live.alarm.next_step


def test_the_alarm_reads_log_lines_at_one_point_zero() -> None:
    config = spec_config(server_info("before"))
    stuck = [p for p in points_from_log(decode_lines()) if p.accept_length == 1.0][:5]
    log = DecodeLogWindow(3600.0)
    for point in stuck:
        log.add(point)
    alarm = stuck_at_one(log.figure(), config)
    assert alarm is not None and "1.000 tokens per verify step" in alarm.message


@pytest.mark.parametrize("length", [0.994, 1.006, 2.0])
def test_no_alarm_outside_the_tolerance_or_without_speculation(length: float) -> None:
    figure = AcceptFigure(length, "decode_log", "last 60 s")
    assert stuck_at_one(figure, spec_config(server_info("before"))) is None
    assert stuck_at_one(AcceptFigure(1.0, "lifetime", "lifetime"), SpecConfig()) is None
    assert stuck_at_one(None, spec_config(server_info("before"))) is None


def test_a_live_acceptance_with_a_healthy_window_has_no_alarm() -> None:
    live = live_acceptance(server_info("after_cycle42"),
                           metrics=metrics_window("after_chat", "after_cycle42"))
    assert live.alarm is None and live.figure is not None
    assert live.figure.label.startswith(f"{live.figure.accept_length:.2f} (metrics, last 1 s")

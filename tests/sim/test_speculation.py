"""The simulated server speaks speculative decoding as SGLang 0.5.23 does: the shapes are
compared with the real recordings in tests/fixtures/realsglang-spec, the figures with what
core.accept computes from them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sim_helpers import chat_prompt
from support.waiting import wait_until

from eagle_tui.core.accept.config import lifetime_figure, spec_config
from eagle_tui.core.accept.decodelog import DecodeLogWindow, points_from_log
from eagle_tui.core.accept.live import live_acceptance
from eagle_tui.core.accept.requests import request_acceptance
from eagle_tui.core.accept.summary import is_degenerate
from eagle_tui.core.accept.window import MetricsWindow, scrape_sample
from eagle_tui.core.sim.launcher import SimProcess

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent.parent / "fixtures" / "realsglang-spec"
FAST = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0", "--enable-metrics",
        "--decode-log-interval", "1")
SPEC = ("--speculative-algorithm", "EAGLE3", "--speculative-num-draft-tokens", "4")


def recorded_meta_keys() -> list[str]:
    line = (FIXTURES / "generate.jsonl").read_text().splitlines()[0]
    return list(json.loads(line)["body"]["meta_info"])


@pytest.fixture(scope="module")
def spec_sim() -> Iterator[SimProcess]:
    with SimProcess([*FAST, *SPEC]) as sim:
        sim.wait_ready(timeout=60)
        yield sim


@pytest.fixture(scope="module")
def plain_sim() -> Iterator[SimProcess]:
    with SimProcess(list(FAST)) as sim:
        sim.wait_ready(timeout=60)
        yield sim


def generate(sim: SimProcess, prompt: list[int], tokens: int = 200) -> dict[str, Any]:
    answer = httpx.post(f"{sim.url}/generate", timeout=30, json={
        "input_ids": prompt, "sampling_params": {"max_new_tokens": tokens, "temperature": 0}})
    answer.raise_for_status()
    body: dict[str, Any] = answer.json()
    return body


def decode_lines(sim: SimProcess, since: int, count: int) -> list[str]:
    """The log's ``Decode batch`` lines after ``since`` (a ``mark()``), once there are
    ``count`` of them (the log is written by another process)."""
    def lines() -> list[str]:
        return [line for line in re.split(r"[\r\n]", sim.log_text()[since:])
                if "Decode batch" in line]
    wait_until(lambda: len(lines()) >= count, what=f"{count} decode lines")
    return lines()


def thinking(text: str) -> list[int]:
    return chat_prompt(text)


def plain(text: str) -> list[int]:
    return chat_prompt(text, think=False)


def test_meta_info_has_the_recorded_spec_fields_in_their_order(spec_sim: SimProcess) -> None:
    meta = generate(spec_sim, thinking("hello"))["meta_info"]
    recorded = [k for k in recorded_meta_keys() if k in meta]
    assert [k for k in meta if k in recorded] == recorded
    assert {k for k in recorded_meta_keys() if k.startswith("spec_")} <= set(meta)
    acceptance = request_acceptance(meta)
    assert meta["spec_accept_length"] == acceptance.accept_length
    assert meta["spec_num_proposed_drafts"] == meta["spec_verify_ct"] * 3
    assert meta["spec_accept_rate"] == acceptance.accept_rate
    histogram = meta["spec_correct_drafts_histogram"]
    assert sum(histogram) == meta["spec_verify_ct"] and histogram[-1] > 0
    # Σ_j P(>= j) x steps = correct drafts, and an answer that stopped = 1 + steps + drafts
    assert round(sum(acceptance.per_position) * acceptance.verify_steps) == \
        meta["spec_num_correct_drafts"]
    if meta["finish_reason"]["type"] == "stop":
        assert meta["completion_tokens"] == 1 + meta["spec_verify_ct"] + \
            meta["spec_num_correct_drafts"]


def test_acceptance_depends_on_the_category_and_falls_with_the_position(
        spec_sim: SimProcess) -> None:
    def pooled(prompts: list[list[int]]) -> tuple[float, tuple[float, ...]]:
        metas = [generate(spec_sim, p, 120)["meta_info"] for p in prompts]
        steps = sum(m["spec_verify_ct"] for m in metas)
        correct = sum(m["spec_num_correct_drafts"] for m in metas)
        hist = [0] * 4
        for m in metas:
            for k, count in enumerate(m["spec_correct_drafts_histogram"]):
                hist[k] += count
        at_least = tuple(sum(hist[j:]) / steps for j in range(1, 4))
        return correct / steps, at_least

    reasoning, reasoning_positions = pooled([thinking(f"question {i}") for i in range(12)])
    prose, prose_positions = pooled([plain(f"question {i}") for i in range(12)])
    assert reasoning < prose - 0.03  # reasoning is harder to draft
    for positions in (reasoning_positions, prose_positions):
        assert positions[0] > positions[1] > positions[2] > 0


def test_a_loop_is_degenerate_and_accepts_almost_every_draft(spec_sim: SimProcess) -> None:
    looped = [generate(spec_sim, plain(f"runaway {i}"), 400) for i in range(40)]
    loops = [a for a in looped if a["meta_info"]["finish_reason"]["type"] == "length"]
    assert loops, "one prompt in 12 runs away"
    for answer in loops:
        assert is_degenerate(answer["output_ids"])
        assert answer["meta_info"]["spec_accept_rate"] > 0.85


def test_server_info_metrics_and_the_log_agree_with_the_answers(spec_sim: SimProcess) -> None:
    info = httpx.get(f"{spec_sim.url}/server_info").json()
    config = spec_config(info)
    assert (config.algorithm, config.num_draft_tokens, config.num_steps, config.eagle_topk) == \
        ("EAGLE3", 4, 3, 1)
    assert "--speculative-algorithm EAGLE3" in info["launch_command"]
    before = scrape_sample(httpx.get(f"{spec_sim.url}/metrics").text, 0.0)
    marked = spec_sim.mark()
    metas = [generate(spec_sim, thinking(f"window {i}"))["meta_info"] for i in range(5)]
    after_text = httpx.get(f"{spec_sim.url}/metrics").text
    after = scrape_sample(after_text, 60.0)
    assert before is not None and after is not None
    window = MetricsWindow(60.0)
    window.add(before)
    window.add(after)
    figure = window.figure(draft_tokens=4)
    assert figure is not None and figure.source == "metrics"
    expected = sum(m["completion_tokens"] for m in metas) / sum(m["spec_verify_ct"] for m in metas)
    assert figure.accept_length == pytest.approx(expected)
    assert re.search(r'^sglang:spec_verify_calls_total\{engine_type="unified",model_name="[^"]+"\}'
                     r" \d+\.0$", after_text, re.MULTILINE)
    assert re.search(r"^sglang:spec_num_draft_tokens\{.*\} 4\.0$", after_text, re.MULTILINE)
    points = points_from_log(decode_lines(spec_sim, marked, 5))
    assert len(points) == 5  # one decode line per answer at --decode-log-interval 1, fast
    expected_log = [(m["spec_verify_ct"] + m["spec_num_correct_drafts"]) / m["spec_verify_ct"]
                    for m in metas]
    assert [p.accept_length for p in points] == pytest.approx(expected_log, abs=0.005)
    lifetime = lifetime_figure(httpx.get(f"{spec_sim.url}/server_info").json())
    assert lifetime is not None and lifetime.source == "lifetime" and lifetime.accept_length > 1


def test_an_idle_flush_resets_the_lifetime_figure(start_sim: Any) -> None:
    sim = start_sim(*SPEC, "--decode-log-interval", "1")
    generate(sim, thinking("before the flush"))
    assert lifetime_figure(httpx.get(f"{sim.url}/server_info").json()) is not None
    assert httpx.post(f"{sim.url}/flush_cache").status_code == 200
    state = httpx.get(f"{sim.url}/server_info").json()["internal_states"][0]
    assert "avg_spec_accept_length" not in state


def test_without_speculation_gauges_read_zero_and_there_is_no_verify_counter(
        plain_sim: SimProcess) -> None:
    marked = plain_sim.mark()
    meta = generate(plain_sim, thinking("plain"))["meta_info"]
    assert not [k for k in meta if k.startswith("spec_")]
    info = httpx.get(f"{plain_sim.url}/server_info").json()
    assert info["speculative_algorithm"] is None
    assert "avg_spec_accept_length" not in info["internal_states"][0]
    assert not spec_config(info).enabled
    text = httpx.get(f"{plain_sim.url}/metrics").text
    for gauge in ("spec_accept_length", "spec_accept_rate", "spec_num_steps",
                  "spec_num_draft_tokens"):
        assert re.search(rf"^sglang:{gauge}\{{.*\}} 0\.0$", text, re.MULTILINE), gauge
    assert "spec_verify_calls_total" not in text
    decode = decode_lines(plain_sim, marked, 1)
    assert not any("accept len" in line for line in decode)
    recorded = (FIXTURES / "no-spec" / "metrics_after_chat.txt").read_text()
    assert "spec_verify_calls_total" not in recorded  # as real SGLang


def test_an_eagle3_draft_under_eagle_accepts_exactly_one_and_raises_the_alarm(
        start_sim: Any) -> None:
    sim = start_sim("--enable-metrics", "--decode-log-interval", "1",
                    "--speculative-algorithm", "EAGLE",
                    "--speculative-draft-model-path", "/models/kimi-k2.5-eagle3")
    marked = sim.mark()
    metas = [generate(sim, plain(f"stuck {i}"))["meta_info"] for i in range(3)]
    assert all(m["spec_num_correct_drafts"] == 0 for m in metas)
    window = DecodeLogWindow(3600.0)
    for point in points_from_log(decode_lines(sim, marked, 3)):
        window.add(point)
    info = httpx.get(f"{sim.url}/server_info").json()
    live = live_acceptance(info, log=window)
    assert live.figure is not None and live.figure.accept_length == 1.0
    assert live.alarm is not None and live.alarm.kind == "stuck_at_one"
    assert "--speculative-algorithm" in live.alarm.next_step

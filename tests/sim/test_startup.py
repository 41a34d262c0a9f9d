"""A start-up watched from outside: refused port, 503, 200, and a log the §6 regexes parse."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from sim_helpers import PHASE_PATTERNS, PREFIX

from eagle_tui.core.sim.launcher import SimProcess

pytestmark = pytest.mark.slow

# 0.1 x the real-time script, loading twice as slow and a 1.5 s warm-up (503) window
TIMED_ARGS = ["--time-scale", "0.1", "--slow-phase", "loading_weights=2",
              "--slow-phase", "warming_up=10", "--tokens-per-s", "0", "--ttft", "0"]


@dataclass
class Observed:
    """What a client saw of /health (and friends) during one start-up."""

    sim: SimProcess
    health: list[str] = field(default_factory=list)
    model_info_while_warming: int | None = None
    models_while_warming: int | None = None
    health_body_while_warming: bytes | None = None


def health_status(url: str) -> str:
    try:
        return str(httpx.get(url + "/health", timeout=5).status_code)
    except httpx.ConnectError:
        return "refused"


@pytest.fixture(scope="module")
def observed() -> Iterator[Observed]:
    with SimProcess(TIMED_ARGS) as sim:
        seen = Observed(sim)
        seen.health.append(health_status(sim.url))
        sim.wait_for_line(r"Load weight begin", timeout=30)
        seen.health.append(health_status(sim.url))
        sim.wait_bound(timeout=30)
        warming = httpx.get(sim.url + "/health", timeout=5)
        seen.health.append(str(warming.status_code))
        seen.health_body_while_warming = warming.content
        seen.model_info_while_warming = httpx.get(sim.url + "/model_info").status_code
        seen.models_while_warming = httpx.get(sim.url + "/v1/models").status_code
        sim.wait_ready(timeout=30)
        seen.health.append(health_status(sim.url))
        yield seen


def test_health_goes_refused_then_503_then_200(observed: Observed) -> None:
    assert observed.health == ["refused", "refused", "503", "200"]
    assert observed.health_body_while_warming == b""


def test_info_routes_answer_while_warming_up(observed: Observed) -> None:
    assert observed.model_info_while_warming == 200
    assert observed.models_while_warming == 200


def test_every_line_is_prefixed_or_a_bar(observed: Observed) -> None:
    for line in observed.sim.log_lines():
        if line and not re.match(PHASE_PATTERNS["SHARDS"], line):
            assert PREFIX.match(line) or re.match(PHASE_PATTERNS["GRAPH_BAR"], line), line[:200]


def test_every_phase_appears_in_order(observed: Observed) -> None:
    lines = observed.sim.log_lines()
    first_seen = []
    for name, pattern in PHASE_PATTERNS.items():
        hits = [i for i, line in enumerate(lines) if re.search(pattern, line)]
        assert hits, f"{name} never logged"
        first_seen.append(hits[0])
    assert first_seen == sorted(first_seen)


def test_scheduler_lines_carry_rank_tags(observed: Observed) -> None:
    tags = set()
    for line in observed.sim.log_lines():
        match = PREFIX.match(line)
        if match and re.search(PHASE_PATTERNS["WEIGHT_BEG"], match.group(3)):
            tags.add(match.group(2))
    assert tags == {f" TP{rank}" for rank in range(8)}
    uvicorn = [PREFIX.match(line) for line in observed.sim.log_lines() if "Uvicorn running" in line]
    assert uvicorn and uvicorn[0] is not None and uvicorn[0].group(2) == ""


def test_bars_redraw_with_carriage_returns(observed: Observed) -> None:
    text = observed.sim.log_text()
    assert "\rMulti-thread loading shards:" in text and "\rCapturing batches (bs=" in text
    shards = [re.match(PHASE_PATTERNS["SHARDS"], line) for line in observed.sim.log_lines()]
    progress = [(int(m.group(2)), int(m.group(3)), int(m.group(4))) for m in shards if m]
    assert progress[0] == (0, 0, 64) and progress[-1] == (100, 64, 64)
    assert [p[1] for p in progress] == sorted(p[1] for p in progress)
    graphs = [re.match(PHASE_PATTERNS["GRAPH_BAR"], line) for line in observed.sim.log_lines()]
    percents = [int(m.group(3)) for m in graphs if m]
    assert percents == sorted(percents) and percents[-1] == 100


def test_phase_durations_follow_time_scale_and_slow_phase(observed: Observed) -> None:
    weight_end = observed.sim.wait_for_line(PHASE_PATTERNS["WEIGHT_END"], timeout=1)
    assert 1.5 <= float(weight_end.group(1)) < 3.5  # 8 s x 0.1 x 2
    graph_end = observed.sim.wait_for_line(PHASE_PATTERNS["GRAPH_END"], timeout=1)
    assert 0.45 <= float(graph_end.group(3)) < 2.0  # 5 s x 0.1


def test_sched_info_reports_the_configured_limits(observed: Observed) -> None:
    info = observed.sim.wait_for_line(PHASE_PATTERNS["SCHED_INFO"], timeout=1)
    assert int(info.group(4)) == 256 and int(info.group(5)) == 262144
    bind = observed.sim.wait_for_line(PHASE_PATTERNS["UV_BIND"], timeout=1)
    assert int(bind.group(3)) == observed.sim.port
    started = observed.sim.wait_for_line(PHASE_PATTERNS["UV_START"], timeout=1)
    assert int(started.group(1)) == observed.sim.pid


def test_warm_up_polls_model_info_then_generates(observed: Observed) -> None:
    lines = observed.sim.log_lines()
    order = [next(i for i, line in enumerate(lines) if re.search(pattern, line)) for pattern in (
        r"Uvicorn running on", r'"GET /model_info HTTP/1\.1" 200 OK', r"Prefill batch",
        r'"POST /generate HTTP/1\.1" 200 OK', r'"POST /freeze_gc HTTP/1\.1" 200 OK',
        r"The server is fired up and ready to roll!")]
    assert order == sorted(order)

"""Calibrated windows (issue 19 item 6): SGLang's own start-up figures into history.

The figures come from a real SGLang 0.5.23 start (tests/fixtures/pyspy/plain: its log line
``Engine startup timings (s): …`` and its ``/server_info``), and from the sim, which prints
the same line and serves the same ``startup_time``.
"""

from __future__ import annotations

import json
from pathlib import Path

import health_fakes as f
import msgspec
import pytest
from health_fakes import Driver, alive, chunk

from eagle_tui.core.health import timings
from eagle_tui.core.health.history import StartupHistory, StartupRecord, expectations_from
from eagle_tui.core.health.observed import Observation
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.poller import HealthOutcome
from eagle_tui.core.health.settings import WatchSettings

PLAIN = Path(__file__).resolve().parents[1] / "fixtures" / "pyspy" / "plain"
REAL_LINE = next(
    line for line in (PLAIN / "server.log").read_text().splitlines() if timings.MARKER in line
)


def test_the_real_log_line_and_server_info_give_the_same_figures() -> None:
    from_log = timings.parse_log_line(REAL_LINE)
    info = json.loads((PLAIN / "server_info.json").read_text())
    from_info = timings.from_server_info(info)
    assert from_log == {"load_weight": 0.32, "kv_cache_allocation": 2.19,
                        "scheduler_e2e": 19.84, "cuda_graph": 0.0, "tokenizer_e2e": 299.61}
    assert from_log is not None and set(from_info) == set(from_log)
    for name, value in from_log.items():
        assert from_info[name] == pytest.approx(value, abs=0.01)
    assert timings.end_to_end(from_log) == 299.61
    assert timings.parse_log_line("Load weight end. elapsed=3.2 s") is None
    assert timings.from_server_info({"version": "0.5.23"}) == {}


def test_a_ready_start_up_records_the_log_figures() -> None:
    d = Driver(history=None)
    d.answer(HealthOutcome.REFUSED)
    d.tick(chunk(f.ARGS, *f.BEGIN, *f.WEIGHTS_END, *f.KV, *f.GRAPH_BEGIN), alive())
    d.advance(10)
    d.tick(chunk(*f.GRAPH_END, f.LIMITS, REAL_LINE, *f.UVICORN), alive())
    log = d.state.log
    assert log is not None and log.engine_timings["tokenizer_e2e"] == 299.61
    assert REAL_LINE not in log.unknown_lines  # read, not an unknown line


def test_history_records_them_and_the_window_comes_from_the_server(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    d = Driver(history=path)
    d.answer(HealthOutcome.REFUSED)
    d.tick(chunk(f.ARGS, *f.BEGIN, *f.WEIGHTS_END, *f.KV, *f.GRAPH_BEGIN), alive())
    d.advance(20)
    d.tick(chunk(*f.GRAPH_END, f.LIMITS, REAL_LINE, *f.UVICORN), alive())
    d.answer(HealthOutcome.OK, 200)
    d.advance(1)
    d.tick(chunk(f.READY), alive())
    recorded = d.state.recorded
    assert recorded is not None and recorded.server_timings["load_weight"] == 0.32
    stored = StartupHistory(path).records(recorded.signature)[-1]
    assert stored.server_timings == recorded.server_timings
    # SGLang counted 300 s from its engine's launch; the watch saw 21 s of it
    expected = StartupHistory(path).expectations(recorded.signature, WatchSettings())
    assert expected.expectation.window_s == pytest.approx(299.61 * 1.25)
    assert "SGLang's own startup timings" in expected.expectation.source
    typical = dict(expected.expectation.typical_phase_s)
    assert typical[Phase.LOADING_WEIGHTS] == 0.32 and typical[Phase.ALLOCATING_KV] == 2.19


def test_server_info_figures_count_when_the_log_has_none(tmp_path: Path) -> None:
    d = Driver(history=tmp_path / "history.jsonl")
    d.answer(HealthOutcome.REFUSED)
    d.tick(chunk(f.ARGS, *f.BEGIN, *f.WEIGHTS_END, *f.KV, *f.GRAPH_BEGIN), alive())
    d.advance(5)
    d.tick(chunk(*f.GRAPH_END, f.LIMITS, *f.UVICORN), alive())
    d.answer(HealthOutcome.OK, 200)
    d.advance(1)
    info = json.loads((PLAIN / "server_info.json").read_text())
    obs = Observation(now=d.now, wall=d.now + d.wall_offset, log=chunk(f.READY), probe=alive(),
                      health=d.health, server_timings=timings.from_server_info(info))
    d.state.update(obs)
    recorded = d.state.recorded
    assert recorded is not None
    assert recorded.server_timings["kv_cache_allocation"] == pytest.approx(2.189, abs=0.001)


def test_phase_limits_from_server_figures_where_no_silence_was_learned() -> None:
    record = StartupRecord("sig", 0.0, 100.0, server_timings={"load_weight": 40.0})
    found = expectations_from([record], WatchSettings())
    assert found.stall_limits[Phase.LOADING_WEIGHTS] == 120.0
    assert found.stall_sources[Phase.LOADING_WEIGHTS] == (
        "SGLang's own load_weight timing over 1 start-up"
    )
    learned = StartupRecord("sig", 0.0, 100.0, max_gaps={"loading_weights": 50.0},
                            server_timings={"load_weight": 40.0})
    assert expectations_from([learned], WatchSettings()).stall_limits[
        Phase.LOADING_WEIGHTS] == 150.0  # fmt: skip
    old = msgspec.json.decode(b'{"signature": "s", "finished_at": 1, "total_s": 2}',
                              type=StartupRecord)
    assert old.own_timings == {}  # records written before the field read back

"""Start-up history, signatures, state/config paths and the fake clock."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import msgspec
import pytest
from support.clock import FakeClock

from eagle_tui.core import paths
from eagle_tui.core.health.history import (
    HISTORY_FILE,
    StartupHistory,
    StartupRecord,
    expectations_from,
)
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.signature import signature_from_argv, signature_from_server_args

SIG = "model=/m/K tp=8 dp=1 pp=1 ep=1 quant=none spec=none"


def record(total: float, gaps: dict[str, float] | None = None, sig: str = SIG) -> StartupRecord:
    return StartupRecord(sig, 1.0, total, {"loading_weights": total / 2}, gaps or {})


def test_records_round_trip_and_corrupt_lines_are_skipped(tmp_path: Path) -> None:
    history = StartupHistory(tmp_path / "h.jsonl")
    history.append(record(300.0, {"capturing_graphs": 20.0}))
    with open(tmp_path / "h.jsonl", "a") as out:
        out.write('not json\n{"signature": 1}\n[]\n')
    history.append(record(400.0))
    history.append(record(50.0, sig="other"))
    found = history.records(SIG)
    assert [r.total_s for r in found] == [300.0, 400.0]
    assert found[0].max_gaps == {"capturing_graphs": 20.0}


def test_expectations_default_without_history_and_learned_with_it() -> None:
    settings = WatchSettings()
    none = expectations_from([], settings)
    assert none.expectation.window_s == 600.0 and "default" in none.expectation.source
    # Defaults come from the corpus now (issue 10): a phase's is its longest step's.
    assert none.stall_limits[Phase.CAPTURING_GRAPHS] == 600.0
    learned = expectations_from(
        [record(300.0, {"capturing_graphs": 20.0}), record(400.0, {"capturing_graphs": 5.0})],
        settings,
    )
    assert learned.expectation.window_s == 500.0  # slowest × 1.25
    assert learned.expectation.starts_recorded == 2
    assert learned.stall_limits[Phase.CAPTURING_GRAPHS] == 60.0  # longest gap × 3
    assert learned.stall_limits[Phase.LAUNCHING] == 120.0  # never seen: the default
    assert dict(learned.expectation.typical_phase_s)[Phase.LOADING_WEIGHTS] == 200.0
    short = expectations_from([record(100.0, {"allocating_kv": 1.0})], settings)
    assert short.stall_limits[Phase.ALLOCATING_KV] == settings.min_stall_s


def test_history_lives_in_the_state_dir_and_survives_an_unwritable_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EAGLE_TUI_STATE_DIR", str(tmp_path / "state"))
    history = StartupHistory()
    assert history.path == tmp_path / "state" / HISTORY_FILE
    history.append(record(10.0))
    assert json.loads(history.path.read_text())["total_s"] == 10.0
    (tmp_path / "blocked").write_text("a file, not a directory")
    broken = StartupHistory(tmp_path / "blocked" / "h.jsonl")
    broken.append(record(10.0))
    assert broken.problem is not None and "cannot write" in broken.problem
    assert broken.records(SIG) == []


def test_the_same_startup_seen_twice_is_recorded_once_and_only_ready_ones_teach(
    tmp_path: Path,
) -> None:
    history = StartupHistory(tmp_path / "h.jsonl")
    history.append(record(42.0))
    history.append(record(42.0))  # a second dashboard reconstructed it from the same log
    assert len(history.records(SIG)) == 1
    crashed = StartupRecord(SIG, 9.0, 900.0, {}, {}, outcome="crashed")
    history.append(crashed)
    assert [r.outcome for r in history.records(SIG)] == ["ready", "crashed"]
    learned = history.expectations(SIG, WatchSettings())
    assert learned.expectation.window_s == pytest.approx(42.0 * 1.25)


def test_large_history_is_compacted(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(b"".join(msgspec.json.encode(record(float(i))) + b"\n" for i in range(2000)))
    StartupHistory(path).append(record(9999.0))
    lines = path.read_text().splitlines()
    assert len(lines) == 1000 and json.loads(lines[-1])["total_s"] == 9999.0


def test_signatures_from_server_args_and_command_lines_agree() -> None:
    from_args = signature_from_server_args(
        {"model_path": "/m/K", "tp_size": "8", "dp_size": "1", "quantization": "None"}
    )
    from_argv = signature_from_argv(
        ["python", "-m", "sglang.launch_server", "--model-path", "/m/K", "--tp", "8", "--port=1"]
    )
    assert from_args == from_argv == SIG
    assert signature_from_server_args({"tp_size": "8"}) is None
    assert signature_from_argv(["python", "-m", "eagle_tui.core.sim"]) is None


def test_paths_follow_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EAGLE_TUI_STATE_DIR", raising=False)
    monkeypatch.delenv("EAGLE_TUI_CONFIG_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xs"))
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert paths.state_dir() == tmp_path / "xs" / "eagle-tui"
    assert paths.config_dir() == tmp_path / "home" / ".config" / "eagle-tui"
    monkeypatch.setenv("EAGLE_TUI_STATE_DIR", str(tmp_path / "own"))
    monkeypatch.setenv("EAGLE_TUI_CONFIG_DIR", str(tmp_path / "conf"))
    assert paths.state_dir() == tmp_path / "own"
    assert paths.config_dir() == tmp_path / "conf"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.delenv("EAGLE_TUI_STATE_DIR")
    assert paths.state_dir() == tmp_path / "home" / ".local" / "state" / "eagle-tui"


async def test_fake_clock_wakes_sleepers_only_when_advanced() -> None:
    clock = FakeClock(start=10.0, wall_start=500.0)
    woke: list[float] = []

    async def sleeper(seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(clock.monotonic())

    tasks = [asyncio.create_task(sleeper(s)) for s in (5.0, 1.0)]
    await asyncio.sleep(0)
    assert clock.sleepers == 2
    clock.advance(2.0)
    await asyncio.sleep(0)
    assert woke == [12.0]
    clock.advance(3.0)
    await asyncio.gather(*tasks)
    assert woke == [12.0, 15.0]
    assert clock.wall() == 505.0
    await clock.sleep(0)  # yields, returns at once

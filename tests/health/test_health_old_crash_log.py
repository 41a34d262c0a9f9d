"""Issue 20 item 11: ``watch`` on the log of a server that crashed long ago (the recorded
real SGLang 0.5.23 crash of tests/fixtures/serverlogs/42, its file dated when it was written)
times the run from its log (44 s), not up to now (days), and a second look records nothing
new in history."""

from __future__ import annotations

import datetime
import json
import os
import shutil
from pathlib import Path

import pytest

from eagle_tui.core.sim.launcher import free_port
from eagle_tui.tui.cli.main import main

FIXTURE = Path(__file__).parents[1] / "fixtures" / "serverlogs" / (
    "42-real-0523-cpu-no-cpu-engine-crash.log")
LAST_STAMP = datetime.datetime(2026, 11, 30, 15, 19, 48)  # its last line, local time
SPAN_S = 44.0  # server_args at 15:19:04 to the traceback at 15:19:48


def test_an_old_crash_log_is_timed_by_its_lines_and_recorded_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = Path(shutil.copy(FIXTURE, tmp_path / "server.log"))
    written = LAST_STAMP.timestamp()
    os.utime(log, (written, written))  # as the crashed server left it
    history = tmp_path / "history.jsonl"
    url = f"http://127.0.0.1:{free_port()}"  # long gone: nothing listens
    args = ["watch", "--url", url, "--log", str(log), "--history-file", str(history),
            "--interval", "0.05", "--health-timeout", "1", "--json"]
    for _ in range(2):
        assert main(args) == 3
        verdict = json.loads(capsys.readouterr().out.splitlines()[-1])
        assert verdict["outcome"] == "crashed"
        assert abs(verdict["elapsed_s"] - SPAN_S) <= 2.0, verdict["elapsed_s"]
    records = [json.loads(line) for line in history.read_text().splitlines()]
    assert len(records) == 1, records
    assert abs(records[0]["total_s"] - SPAN_S) <= 2.0
    assert abs(records[0]["finished_at"] - written) <= 2.0

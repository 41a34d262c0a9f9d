"""``eagle-tui watch --all``: every server on this host, and one started after the watch began,
each line naming its server; the loop is ``core.health.follow``."""

from __future__ import annotations

import json
import os
import threading
from functools import partial
from pathlib import Path

import pytest

from eagle_tui.core.health import follow
from eagle_tui.core.proc.discover import discover_servers
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.tui.cli import watch
from eagle_tui.tui.cli.main import main

pytestmark = pytest.mark.slow
SIM = ["--time-scale", "0.1", "--tokens-per-s", "0"]


def test_watch_all_finds_running_and_later_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EAGLE_TUI_STATE_DIR", str(tmp_path / "state"))
    # Only this test's servers: parallel workers' sims would crowd the watch under load.
    monkeypatch.setattr(watch, "follow_all", partial(
        follow.follow_all, discover=partial(discover_servers, within=os.getpid())))
    later: list[SimProcess] = []

    def start_later() -> None:
        later.append(SimProcess(SIM, log_path=tmp_path / "later.log").start())

    with SimProcess(SIM, log_path=tmp_path / "early.log") as early:
        early.wait_ready(timeout=60)
        timer = threading.Timer(4.0, start_later)
        timer.start()
        try:
            code = main(["watch", "--all", "--json", "--timeout", "25", "--interval", "0.2"])
        finally:
            timer.join()
            for sim in later:
                sim.close()
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    found = {e["pid"]: e for e in events if e["event"] == "server"}
    assert early.pid in found and later and later[0].pid in found
    assert found[early.pid]["log"] == str(tmp_path / "early.log")
    assert found[later[0].pid]["log"] == str(tmp_path / "later.log")
    ready = {e["server"] for e in events if e["event"] == "phase" and e["phase"] == "ready"}
    assert f":{early.port} (PID {early.pid})" in ready
    assert f":{later[0].port} (PID {later[0].pid})" in ready


def test_watch_all_refuses_a_url(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["watch", "--all", "--url", "http://127.0.0.1:1"]) == 2
    assert "--all finds the servers itself" in capsys.readouterr().err

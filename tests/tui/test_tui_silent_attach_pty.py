"""Issue 38 on a real terminal: the dashboard attached to a start-up whose log has been
silent for 14 minutes reads the stall on its first screen (the server's clocks, not the
attach)."""

from __future__ import annotations

import pytest
from support.silent_log import silent_sim
from support.terminal import PtyTerminal

pytestmark = pytest.mark.slow


def test_the_first_screen_reads_a_14_minute_stall(start_sim) -> None:
    sim = silent_sim(start_sim)
    with PtyTerminal(["--url", sim.url, "--log", str(sim.log_path)], cols=160, rows=50) as term:
        term.wait_for("no log progress for 14m", timeout=60)
        screen = term.text()
        print(screen)
        assert "stalled" in screen
        assert "last log 14m" in screen
        term.press("q")
        term.wait_until(lambda: term.alive() is not None, "the dashboard quit")


def test_a_server_found_ready_without_a_log_has_no_time_in_phase(start_sim) -> None:
    sim = start_sim("--tp-size", "1")
    with PtyTerminal(["--url", sim.url], cols=140, rows=40) as term:
        term.wait_for("● ready", timeout=60)
        term.wait_for("time in phase unknown")  # not the seconds since the attach
        line = next(line for line in term.lines() if "● ready" in line)
        print(line)
        assert " in phase" not in line.replace("time in phase unknown", "")
        term.press("q")
        term.wait_until(lambda: term.alive() is not None, "the dashboard quit")

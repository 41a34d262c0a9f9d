"""The Fleet view's keys on a real terminal (tests/support/terminal.py): ``5`` opens it, ``o``
sorts (by phase: a crashed server first), ``/`` filters, ``Esc`` shows every row again,
``Enter`` opens the highlighted server's card and log in the Server view. Three simulated
servers in processes of their own; one dies at start-up with a fatal flag."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.terminal import PtyTerminal

from eagle_tui.core.sim.launcher import SimProcess

pytestmark = pytest.mark.slow

FAST = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0")


@pytest.fixture
def three_sims(tmp_path: Path) -> Iterator[list[SimProcess]]:
    with (SimProcess(FAST, log_path=tmp_path / "alpha.log") as alpha,
          SimProcess(FAST, log_path=tmp_path / "beta.log") as beta,
          SimProcess((*FAST, "--fatal", "oom"), log_path=tmp_path / "gamma.log") as gamma):
        alpha.wait_ready(90)
        beta.wait_ready(90)
        yield [alpha, beta, gamma]


def row_of(term: PtyTerminal, port: int) -> int:
    """The screen row showing the server on ``port``."""
    found = term.find(f":{port}")
    assert found is not None, term.text()
    return found[1]


def test_fleet_keys_sort_filter_and_enter(tmp_path: Path, three_sims: list[SimProcess]) -> None:
    alpha, beta, gamma = three_sims
    args = [arg for sim in three_sims for arg in ("--url", sim.url, "--log", str(sim.log_path))]
    with PtyTerminal(args, cols=120, rows=40) as term:
        term.wait_for("1 Server")
        term.press("5")
        term.wait_for("3 servers:")
        term.wait_until(lambda: "crashed" in term.text() and "2 ready" in term.text(),
                        "two ready, one crashed")
        # waited for, not read once: a frame can be caught half-written ("fata")
        term.wait_until(lambda: "fatal:oom" in term.lines()[row_of(term, gamma.port)],
                        "the crashed server's flag on its row")
        with beta.log_path.open("a") as log:  # followed from its end: written once watched
            log.write("beta marker line\n")

        term.press("o", "o")  # by server, then by phase: down servers first
        term.wait_for("sorted by phase")
        term.wait_until(lambda: row_of(term, gamma.port) < row_of(term, alpha.port)
                        and row_of(term, gamma.port) < row_of(term, beta.port),
                        "the crashed server on top")

        term.press("slash")
        term.burst(str(beta.port), "enter")
        term.wait_until(lambda: f":{alpha.port}" not in term.text()
                        and f":{beta.port}" in term.text(), "only beta's row")
        assert "showing 1 matching" in term.text()  # said in the summary line
        term.press("escape")
        term.wait_until(lambda: f":{alpha.port}" in term.text(), "every row again")

        term.press("slash")
        term.burst(str(beta.port), "enter")
        term.wait_until(lambda: f":{alpha.port}" not in term.text(), "filtered again")
        # What a person reads before pressing Enter: the footer offers it (the table has the
        # keys again; while the search box has them the footer shows only "? Help"). ci15
        # once pressed Enter here and it was lost, with that footer on screen.
        term.wait_for("Open card")
        term.press("enter")  # beta's card and log in the Server view
        term.wait_for("beta marker line")
        term.wait_for("Stacks")  # the Server view's footer (drawn after the log, maybe later)
        term.press("q")
        term.wait_until(lambda: term.alive() is not None, "the dashboard quit")

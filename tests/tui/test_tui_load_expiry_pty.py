"""Issue 38 items 2 and 7 on a real terminal with real simulated servers: a load figure
expires (an idle server's card and Fleet row read idle within a minute of its last
request), a crashed server counts for nothing in the Fleet summary, and an idle server's
``/server_info`` is not polled (its access log holds only the first look)."""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.terminal import PtyTerminal

from eagle_tui.core.sim.launcher import SimProcess

pytestmark = pytest.mark.slow

SERVING = ("--time-scale", "0", "--ttft", "0", "--tp-size", "1", "--tokens-per-s", "40",
           "--decode-log-interval", "10")  # no /metrics: the log's decode lines are the load
INFO_LINE = re.compile(r'"GET /(get_)?server_info HTTP')
IDLE_S = 30.0  # six of the dashboard's former 5 s looks


@pytest.fixture
def two_sims(tmp_path: Path) -> Iterator[tuple[SimProcess, SimProcess]]:
    with (SimProcess(SERVING, log_path=tmp_path / "idle.log") as idle,
          SimProcess((*SERVING, "--enable-metrics"), log_path=tmp_path / "dies.log") as dies):
        idle.wait_ready(90)
        dies.wait_ready(90)
        yield idle, dies


def generate(url: str, tokens: int) -> None:
    httpx.post(f"{url}/generate", timeout=60, json={
        "text": "tell a long story", "sampling_params": {"max_new_tokens": tokens,
                                                          "ignore_eos": True}})


def info_looks(sim: SimProcess) -> int:
    return sum(1 for line in sim.log_lines() if INFO_LINE.search(line))


def test_idle_reads_idle_and_a_dead_server_counts_for_nothing(
        two_sims: tuple[SimProcess, SimProcess]) -> None:
    idle, dies = two_sims
    args = [a for sim in two_sims for a in ("--url", sim.url, "--log", str(sim.log_path))]
    with PtyTerminal(args, cols=140, rows=45) as term:
        term.wait_until(lambda: term.text().count("● ready") == 2, "both cards ready")
        before = info_looks(idle)
        term.wait_until(lambda: info_looks(idle) > before, "the first look at /server_info",
                        timeout=60)
        first_looks = info_looks(idle)

        # The dying server serves a long request and is killed in the middle of it.
        threading.Thread(target=lambda: _quietly(generate, dies.url, 4000), daemon=True).start()
        dies.wait_for_line("Decode batch", timeout=60)
        generate(idle.url, 120)  # three seconds of decoding, then nothing
        served_at = time.monotonic()
        time.sleep(1.5)
        dies.kill()

        term.press("5")
        term.wait_for("2 servers:")
        term.wait_until(lambda: "1 down" in term.text(), "the killed server down", timeout=60)
        term.wait_until(lambda: _row(term, idle.port).split()[2:3] == ["idle"],
                        "the idle server's row reads idle", timeout=60)
        idle_after = time.monotonic() - served_at
        fleet = term.text()
        print("\n".join(line.rstrip() for line in fleet.splitlines()
                        if "servers:" in line or "server " in line or ":" + str(idle.port) in line
                        or ":" + str(dies.port) in line))
        assert "running 0 · queued 0 · 0 tok/s" in fleet  # the dead server's last line: not
        assert idle_after < 60.0

        term.press("1")
        term.wait_until(lambda: "idle since" in term.text(), "the card reads idle")
        print(next(line.strip() for line in term.lines() if "idle since" in line))

        waited = time.monotonic() + IDLE_S
        while time.monotonic() < waited:
            time.sleep(1.0)
        looks = info_looks(idle) - first_looks
        print(f"/server_info requests to the idle server in {IDLE_S:.0f} s idle: {looks}; "
              f"in all: {info_looks(idle)}; idle read {idle_after:.1f} s after its request")
        assert looks == 0
        assert "server_info" not in _last_log(term.text())
        term.press("q")
        term.wait_until(lambda: term.alive() is not None, "the dashboard quit")


def _row(term: PtyTerminal, port: int) -> str:
    found = term.find(f":{port}")
    return "" if found is None else term.lines()[found[1]]


def _last_log(screen: str) -> str:
    return "\n".join(line for line in screen.splitlines() if "last log" in line)


def _quietly(call, *args) -> None:  # type: ignore[no-untyped-def]
    with contextlib.suppress(httpx.HTTPError):  # the server was killed mid-answer
        call(*args)

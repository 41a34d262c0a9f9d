"""Issue 20 item 16: attaching to the log of a server that has served for a long while (its
start-up far more than the follower's tail before the end) gives the whole start-up
timeline, the same as the short log of that start-up alone. The recorded real log of
tests/fixtures/serverlogs/02 (DeepSeek-R1 on two nodes), then 2 MB of its own decode lines."""

from __future__ import annotations

import datetime
import os
import shutil
from pathlib import Path

from eagle_tui.core.clock import SystemClock
from eagle_tui.core.health.assemble import WatchOptions, build_watcher
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import HealthSnapshot
from eagle_tui.core.sim.launcher import free_port
from eagle_tui.core.urls import ServerURL

FIXTURE = Path(__file__).parents[1] / "fixtures" / "serverlogs" / (
    "02-deepseek-r1-2node-h800-ready.log")
SERVING = ("[2025-03-07 11:{m:02d}:{s:02d} TP0] Decode batch. #running-req: 1, #token: 44, "
           "token usage: 0.00, gen throughput (token/s): 0.01, #queue-req: 0\n")


def dated(path: Path, minute: int, second: int) -> Path:
    stamp = datetime.datetime(2025, 3, 7, 11, minute, second).timestamp()
    os.utime(path, (stamp, stamp))
    return path


async def timeline_of(log: Path) -> HealthSnapshot:
    """What a watch attaching to ``log`` ends up with once it has read all of it."""
    options = WatchOptions(url=ServerURL.parse(f"http://127.0.0.1:{free_port()}"),
                           log_path=log, use_history=False, process_access=False, gpu=False,
                           settings=WatchSettings(poll_interval_s=0.05, health_timeout_s=1.0))
    watcher = build_watcher(options, clock=SystemClock())
    try:
        snapshot = await watcher.tick()
        for _ in range(50):  # the follower reads a few MB per tick
            if snapshot.last_log_line and "11:59:59" in snapshot.last_log_line:
                break
            snapshot = await watcher.tick()
        return snapshot
    finally:
        await watcher.aclose()


async def test_a_long_log_gives_the_whole_start_up_timeline(tmp_path: Path) -> None:
    short = Path(shutil.copy(FIXTURE, tmp_path / "short.log"))
    with open(short, "a", encoding="utf-8") as out:
        out.write(SERVING.format(m=59, s=59))  # the same last line: both read to the end
    dated(short, 59, 59)
    long = tmp_path / "long.log"
    with open(long, "w", encoding="utf-8") as out:
        out.write(FIXTURE.read_text(encoding="utf-8"))
        for minute in range(3, 60):
            for second in range(60):
                for _ in range(4):
                    out.write(SERVING.format(m=minute, s=second))
    dated(long, 59, 59)
    assert long.stat().st_size > 6 * 256 * 1024  # far beyond the follower's tail

    expected = (await timeline_of(short)).phase_durations
    got = (await timeline_of(long)).phase_durations
    assert [p for p, _ in expected][:3] == [Phase.LAUNCHING, Phase.DISTRIBUTED_INIT,
                                           Phase.LOADING_WEIGHTS]
    assert got == expected

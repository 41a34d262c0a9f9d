"""A real server whose log has been silent for a while: a sim stalled at loading weights
(``--stall-at``), its log's dated lines moved into the past and the file's modification time
set back with ``os.utime``, as a person finds a start-up they SSH into late."""

from __future__ import annotations

import datetime as dt
import os
import re
import time
from pathlib import Path

from eagle_tui.core.sim.launcher import SimProcess

SILENT_S = 14 * 60.0
STALLED_ARGS = ("--tp-size", "1", "--stall-at", "loading_weights")
_STAMP = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


def age_log(path: Path, seconds: float = SILENT_S) -> None:
    """Move every dated line of ``path`` ``seconds`` into the past and set the file's
    modification time to ``seconds`` ago."""
    back = dt.timedelta(seconds=seconds)

    def earlier(match: re.Match[str]) -> str:
        stamp = dt.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S") - back
        return "[" + stamp.strftime("%Y-%m-%d %H:%M:%S")

    path.write_text(_STAMP.sub(earlier, path.read_text()))
    then = time.time() - seconds
    os.utime(path, (then, then))


def silent_sim(start_sim: object) -> SimProcess:
    """A stalled sim whose log was last written ``SILENT_S`` ago."""
    sim: SimProcess = start_sim(*STALLED_ARGS, wait=None)  # type: ignore[operator]
    sim.wait_for_line("Load weight begin", timeout=60)
    sim.wait_for_line(r"Multi-thread loading shards", timeout=30)
    time.sleep(0.5)  # the sim stops halfway: nothing more is written
    age_log(sim.log_path)
    return sim

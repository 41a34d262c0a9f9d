"""Find a server process by its command line when no PID was given."""

from __future__ import annotations

import contextlib
import os
import re

import psutil

# Words that mark a command line as an SGLang server (or eagle-tui's simulated one).
SERVER_MARKERS = ("sglang", "launch_server", "eagle_tui.core.sim")


def _mentions_port(argv: list[str], port: int) -> bool:
    text = " ".join(argv)
    return re.search(rf"--port(?:=|\s+){port}\b", text) is not None


def find_server_pid(port: int, *, markers: tuple[str, ...] = SERVER_MARKERS) -> int | None:
    """The newest process whose command line names a server marker and ``--port PORT``.

    Newest, because during a restart the old server (same command line) may still be alive,
    and the one being watched is the one that just started.
    """
    best: tuple[float, int] | None = None
    ourselves = _self_and_ancestors()
    for proc in psutil.process_iter(["pid", "cmdline", "create_time"]):
        if proc.info["pid"] in ourselves:
            continue  # `eagle-tui watch --launch -- … --port P` names the port too
        argv = proc.info.get("cmdline") or []
        if not argv or not any(m in " ".join(argv) for m in markers):
            continue
        if not _mentions_port(argv, port):
            continue
        key = (proc.info.get("create_time") or 0.0, proc.info["pid"])
        if best is None or key > best:
            best = key
    return None if best is None else best[1]


def _self_and_ancestors() -> set[int]:
    pids = {os.getpid()}
    with contextlib.suppress(psutil.Error):
        pids.update(p.pid for p in psutil.Process().parents())
    return pids

"""Start-up faults: ``--crash-at``, ``--stall-at`` and ``--fatal`` as the log shows them.

Each fault fires at a point inside its phase (``trigger_point``) and prints what
SGLang prints for that failure before the process goes away. A stall prints
nothing more and never returns: the process stays alive with the port closed
(or, while warming up, open with ``/health`` answering 503 for ever).
"""

from __future__ import annotations

import asyncio
from typing import Final, NoReturn

from eagle_tui.core.sim.config import SimConfig
from eagle_tui.core.sim.log import tracebacks
from eagle_tui.core.sim.log.death import (
    exit_now,
    kill_process_tree,
    rank_failed_during_launch,
    rank_killed_during_launch,
)
from eagle_tui.core.sim.log.sink import SimLog

FATAL_PHASE: Final = {
    "nccl": "launching",
    "rank-died": "loading_weights",
    "oom": "capturing_graphs",
}
"""Where each ``--fatal`` kind strikes (``address-in-use`` strikes when the port is bound)."""

_FATAL_RANK: Final = {"nccl": 2, "rank-died": 5, "oom": 3}


def trigger_point(config: SimConfig, phase: str) -> float | None:
    """Fraction of ``phase`` after which a configured fault fires (None: no fault here)."""
    if config.fatal is not None and FATAL_PHASE.get(config.fatal) == phase:
        return 0.6
    if phase in (config.crash_at, config.stall_at):
        return 0.5
    return None


async def fire(config: SimConfig, log: SimLog, phase: str) -> NoReturn:
    """Run the fault configured for ``phase``; never returns."""
    if config.stall_at == phase and config.crash_at != phase:
        await stall()
    if config.fatal is not None and FATAL_PHASE.get(config.fatal) == phase:
        fatal(config, log, config.fatal)
    crash(log, phase)


async def stall() -> NoReturn:
    """Hang for ever: no output, no progress."""
    while True:
        await asyncio.Event().wait()


def crash(log: SimLog, phase: str) -> NoReturn:
    """``--crash-at PHASE``: the failure typical of that phase."""
    if phase == "launching":
        log.raw(tracebacks.launch_failure() + "\n")
        exit_now(1)
    if phase == "warming_up":
        log.main("Initialization failed. warmup error: " + tracebacks.render(
            (("sglang/srt/entrypoints/http_server.py", 1723, "_execute_server_warmup",
              "res.raise_for_status()", ""),),
            "requests.exceptions.HTTPError: 500 Server Error: Internal Server Error for url: "
            "http://127.0.0.1/generate",
        ))
        kill_process_tree(log)
    traceback_text = {
        "loading_weights": tracebacks.weights_corrupt,
        "allocating_kv": tracebacks.not_enough_memory,
    }.get(phase, lambda: tracebacks.graph_capture_failed(
        "CUDA error: an illegal memory access was encountered", log.dialect.graph_failure_hint()))()
    log.rank(0, f"Scheduler hit an exception: {traceback_text}\n")
    rank_failed_during_launch(log, rank=0, exit_code=1)


def fatal(config: SimConfig, log: SimLog, kind: str) -> NoReturn:
    """``--fatal KIND``: the fatal log lines of that kind, then exit non-zero."""
    if kind == "address-in-use":
        log.raw(f"[{log.timestamp()}] ERROR:    [Errno 98] error while attempting to bind on "
                f"address ('{config.host}', {config.port}): address already in use\n")
        exit_now(1)
    rank = min(_FATAL_RANK[kind], log.tp_size - 1)
    if kind == "rank-died":  # the OS OOM killer: no traceback, just a dead child
        rank_killed_during_launch(log, rank=rank, exit_code=-9)
    text = (tracebacks.nccl_failure() if kind == "nccl"
            else tracebacks.graph_capture_failed(tracebacks.cuda_oom(rank),
                                                 log.dialect.graph_failure_hint()))
    log.rank(rank, f"Scheduler hit an exception: {text}\n")
    rank_failed_during_launch(log, rank=rank, exit_code=1)

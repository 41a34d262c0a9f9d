"""How the simulated server dies, each way as SGLang does.

SGLang ends a failed server with ``kill_process_tree(include_parent=True)``,
which SIGKILLs the whole tree, itself included: in-flight connections simply
drop. A scheduler crash at run time first logs the traceback, then the main
process's SIGQUIT handler, a 5 s pause for crash diagnostics, and the kill.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import NoReturn

from eagle_tui.core.sim.log.sink import SimLog


def kill_process_tree(log: SimLog) -> NoReturn:
    """Log SGLang's last line and SIGKILL this process (exit status -9)."""
    pid = os.getpid()
    log.main(f"kill_process_tree called: parent_pid={pid}, include_parent=True, pid={pid}")
    os.kill(pid, signal.SIGKILL)
    os._exit(137)  # not reached: SIGKILL cannot be caught


def exit_now(code: int) -> NoReturn:
    """Leave at once with ``code`` (the log is flushed on every write)."""
    os._exit(code)


def sigquit_during_launch(log: SimLog, rank: int, exit_code: int) -> NoReturn:
    """A scheduler rank died before the server was up: the launcher's reaction."""
    log.main("Received sigquit from a child process. It usually means the child failed.")
    log.main(f"Rank {rank} scheduler died during initialization (exit code: {exit_code})")
    kill_process_tree(log)


async def scheduler_crash(log: SimLog, traceback_text: str, pause: float,
                          rank: int = 0) -> NoReturn:
    """A scheduler exception while serving: traceback, SIGQUIT, diagnostics pause, kill."""
    log.rank(rank, f"Scheduler hit an exception: {traceback_text}\n")
    log.main("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
    log.main("Sleeping 5 seconds before crash diagnostics to let GPU activity settle.")
    await asyncio.sleep(pause)
    log.main("No live scheduler processes found; skipping py-spy and CUDA coredump.")
    kill_process_tree(log)

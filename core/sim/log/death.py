"""How the simulated server dies, each way as SGLang does (in the log's dialect).

SGLang ends a failed server with ``kill_process_tree(include_parent=True)``,
which SIGKILLs the whole tree, itself included: in-flight connections simply
drop. A scheduler crash at run time first logs the traceback, then the main
process's SIGQUIT handler (0.5: and a 5 s pause for crash diagnostics), then the kill.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import NoReturn

from eagle_tui.core.sim.log.dialect import LaunchDeath
from eagle_tui.core.sim.log.sink import SimLog


def kill_process_tree(log: SimLog) -> NoReturn:
    """Log SGLang's last line (where its version logs one) and SIGKILL this process (-9)."""
    pid = os.getpid()
    line = log.dialect.kill_tree_line(pid)
    if line is not None:
        log.main(line)
    os.kill(pid, signal.SIGKILL)
    os._exit(137)  # not reached: SIGKILL cannot be caught


def exit_now(code: int) -> NoReturn:
    """Leave at once with ``code`` (the log is flushed on every write)."""
    os._exit(code)


def rank_failed_during_launch(log: SimLog, rank: int, exit_code: int) -> NoReturn:
    """A scheduler rank raised before the server was up: the launcher's reaction."""
    _launcher_reacts(log, log.dialect.child_failed(rank, exit_code))


def rank_killed_during_launch(log: SimLog, rank: int, exit_code: int) -> NoReturn:
    """A scheduler rank vanished (SIGKILL, no traceback) before the server was up."""
    _launcher_reacts(log, log.dialect.rank_killed(rank, exit_code))


async def scheduler_crash(log: SimLog, traceback_text: str, pause: float,
                          rank: int = 0) -> NoReturn:
    """A scheduler exception while serving: traceback, SIGQUIT, the pause, kill."""
    log.rank(rank, f"Scheduler hit an exception: {traceback_text}\n")
    crash = log.dialect.runtime_crash()
    for line in crash.before:
        log.main(line)
    await asyncio.sleep(pause)
    for line in crash.after:
        log.main(line)
    kill_process_tree(log)


def _launcher_reacts(log: SimLog, death: LaunchDeath) -> NoReturn:
    for line in death.main_lines:
        log.main(line)
    if death.traceback is not None:
        log.raw(death.traceback + "\n")
    if death.exit_code is None:
        kill_process_tree(log)
    exit_now(death.exit_code)

"""Managed mode: eagle-tui launches the server itself, captures its log, restarts it safely.

The command is an argument list (never a shell string). The server runs in its own session
so a Ctrl-C in the terminal running eagle-tui does not reach it, and it keeps running
after ``eagle-tui watch`` exits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from eagle_tui.core.clock import Clock, SystemClock
from eagle_tui.core.proc.stop import StopReport, StopTimeouts, stop_process_tree


class ManagedServer:
    """One server command that eagle-tui starts and stops (a restart is the watch's:
    ``Watcher.restart_managed``, so the watch reads the stop as a stop and the new start as
    its next timeline).

    Each start moves an earlier log to ``<log>.prev`` and writes a fresh one, so a follower
    on ``log_path`` sees a rotation and the previous run's log survives for diagnosis.
    The process is spawned directly (``posix_spawnp``, not ``subprocess.Popen``) because it
    is meant to outlive eagle-tui: nothing here has to be reaped or closed before exit.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        log_path: str | os.PathLike[str],
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not argv:
            raise ValueError("the server command is empty")
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self.port = port
        self._env = dict(env) if env is not None else None
        self._clock = clock or SystemClock()
        self._pid: int | None = None
        self._exit: int | None = None

    @property
    def pid(self) -> int | None:
        """PID of the current server process, if one was started."""
        return self._pid

    def exit_code(self) -> int | None:
        """The exit status once the process ended (negative: killed by that signal).

        Reaps the process, so it never lingers as a zombie while eagle-tui runs.
        """
        if self._pid is None or self._exit is not None:
            return self._exit
        try:
            pid, status = os.waitpid(self._pid, os.WNOHANG)
        except ChildProcessError:
            return None  # reaped elsewhere; the probe sees it as gone
        if pid == self._pid:
            self._exit = os.waitstatus_to_exitcode(status)
        return self._exit

    def start(self) -> int:
        """Start the command with its output going to the log; returns the PID.

        Raises ``OSError`` when the command cannot be executed.
        """
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.log_path.exists() and self.log_path.stat().st_size > 0:
            os.replace(self.log_path, self.log_path.with_name(self.log_path.name + ".prev"))
        env = dict(os.environ if self._env is None else self._env)
        env.setdefault("PYTHONUNBUFFERED", "1")  # so print() lines reach the log promptly
        log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null_fd = os.open(os.devnull, os.O_RDONLY)
        try:
            self._pid = os.posix_spawnp(
                self.argv[0],
                self.argv,
                env,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, null_fd, 0),
                    (os.POSIX_SPAWN_DUP2, log_fd, 1),
                    (os.POSIX_SPAWN_DUP2, log_fd, 2),
                ],
                setsid=True,  # its own session: a Ctrl-C aimed at eagle-tui spares it
            )
        finally:
            os.close(log_fd)
            os.close(null_fd)
        self._exit = None
        return self._pid

    async def stop(self, timeouts: StopTimeouts | None = None) -> StopReport | None:
        """Stop the running server safely (see ``core.proc.stop``); None if none was started."""
        if self._pid is None:
            return None
        return await stop_process_tree(
            self._pid, port=self.port, timeouts=timeouts, clock=self._clock, reap=self.exit_code
        )

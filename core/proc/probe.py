"""Probe the server's process tree and port on every tick; never raises.

The probe keeps psutil ``Process`` objects between calls because CPU use is measured
between two looks, and it remembers every child it has seen so a rank that dies while its
parent lives is reported (``children_lost``) instead of silently vanishing.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

import psutil

from eagle_tui.core.outside import clean, command_line
from eagle_tui.core.proc.discover import find_server_pid
from eagle_tui.core.proc.hostview import HostLook
from eagle_tui.core.proc.ports import port_status
from eagle_tui.core.proc.report import ChildInfo, PortStatus, ProbeReport, ProcessReport

ExitCode = Callable[[], int | None]


class ProcessProbe:
    """Watch one server process (given, or discovered by command line and port).

    ``exit_code`` returns the exit status when eagle-tui is the parent (managed mode);
    ``discover`` looks for the newest server process on ``port`` when no PID is pinned.
    """

    def __init__(
        self,
        pid: int | None = None,
        *,
        port: int | None = None,
        exit_code: ExitCode | None = None,
        discover: bool = False,
    ) -> None:
        self._pinned = pid is not None
        self._pid = pid
        self._port = port
        self._exit_code = exit_code
        self._discover = discover and not self._pinned
        self._proc: Any = None
        self._create_time: float | None = None
        self._children: dict[int, Any] = {}
        self._host = HostLook()
        self._seen_children: dict[int, ChildInfo] = {}
        self._last: ProcessReport | None = None
        self._last_tree: frozenset[int] | None = None

    @property
    def pid(self) -> int | None:
        """The PID being watched, if known."""
        return self._pid

    @property
    def port(self) -> int | None:
        """The port whose holder is checked, if any."""
        return self._port

    def adopt(self, pid: int) -> None:
        """Watch ``pid`` (learned from the log) unless a PID was given explicitly.

        Not pinned: when the server is restarted, discovery by port finds the new one.
        """
        if not self._pinned and pid != self._pid:
            self._switch_to(pid)

    def probe(self) -> ProbeReport:
        """The process tree and port now, with any problem met while looking.

        Once the server is gone, its last known tree still decides who "the server" is, so
        another process holding the port stays a conflict until the port is free.
        """
        problems: list[str] = []
        process = self._safe(self._probe_process, problems, "process")
        if process is not None and process.alive:
            self._last_tree = process.tree_pids
        server_pids = self._last_tree if process is not None else None
        port = self._safe(lambda: self._probe_port(server_pids), problems, "port")
        return ProbeReport(process, port, tuple(problems))

    @staticmethod
    def _safe(step: Callable[[], Any], problems: list[str], what: str) -> Any:
        try:
            return step()
        except Exception as exc:  # psutil raises many kinds; the watch must go on
            problems.append(f"{what} probe failed: {type(exc).__name__}: {exc}")
            return None

    def _probe_port(self, server_pids: frozenset[int] | None) -> PortStatus | None:
        if self._port is None:
            return None
        return port_status(self._port, server_pids, self._host.listening_inodes)

    def _probe_process(self) -> ProcessReport | None:
        if self._discover and not self._pinned:
            found = (find_server_pid(self._port, self._last_tree or (),
                                     self._host.listening_inodes)
                     if self._port is not None else None)
            if (found is not None and found != self._pid and not self._tree_has(found)
                    and not self._older_than_watched(found)):
                self._switch_to(found)
        if self._pid is None:
            return None
        report = self._look()
        self._last = report
        return report

    def _tree_has(self, pid: int) -> bool:
        """A server process inside the watched tree (a router's worker) is not a new server."""
        last = self._last
        return last is not None and last.alive and pid in last.tree_pids

    def _older_than_watched(self, pid: int) -> bool:
        """``pid`` started before the process watched so far: not its restart but another
        server that was there first (after a port-conflict crash, the port's holder, which
        stays named as the holder instead of becoming "the server")."""
        if self._create_time is None:
            return False
        try:
            return bool(psutil.Process(pid).create_time() < self._create_time)
        except psutil.Error:
            return False

    def _switch_to(self, pid: int) -> None:
        self._pid = pid
        self._proc = None
        self._create_time = None
        self._children.clear()
        self._seen_children.clear()
        self._last = None
        self._last_tree = None

    def _look(self) -> ProcessReport:
        assert self._pid is not None
        code = self._exit_code() if self._exit_code is not None else None
        if code is not None:
            return self._gone("exited", code)
        try:
            proc = self._process()
            with proc.oneshot():
                status = proc.status()
                if status == psutil.STATUS_ZOMBIE:
                    # Our child's exit code is there once it is reaped (maybe by now).
                    late = self._exit_code() if self._exit_code is not None else None
                    return self._gone("exited" if late is not None else "zombie", late)
                return self._alive_report(proc, status)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return self._gone("gone", None)

    def _process(self) -> Any:
        if self._proc is None:
            self._proc = psutil.Process(self._pid)
            self._create_time = self._proc.create_time()
        elif self._proc.create_time() != self._create_time:
            raise psutil.NoSuchProcess(self._pid)  # the PID was reused by another process
        return self._proc

    def _alive_report(self, proc: Any, status: str) -> ProcessReport:
        children = self._look_children(proc)
        cpu = _cpu(proc)
        total_cpu = None if cpu is None else cpu + sum(c.cpu_percent or 0.0 for c in children)
        return ProcessReport(
            pid=proc.pid,
            alive=True,
            status=status,
            name=clean(_quiet(proc.name, "")),
            cmdline=command_line(_quiet(proc.cmdline, [])),
            create_time=self._create_time,
            cpu_percent=total_cpu,
            rss_bytes=_quiet(lambda: proc.memory_info().rss, None),
            children=children,
            children_lost=self._lost_children(children),
        )

    def _look_children(self, proc: Any) -> tuple[ChildInfo, ...]:
        found: list[ChildInfo] = []
        for child in self._children_of(proc):
            cached = self._children.setdefault(child.pid, child)
            try:
                if cached.status() == psutil.STATUS_ZOMBIE:
                    continue
                info = ChildInfo(child.pid, _child_name(cached), True, _cpu(cached))
            except psutil.Error:
                continue
            self._seen_children[child.pid] = info
            found.append(info)
        return tuple(found)

    def _children_of(self, proc: Any) -> list[Any]:
        """Every process below ``proc``: on Linux from the host scan watchers share (psutil
        scans the whole host for each server's children), else psutil's."""
        if sys.platform != "linux":
            try:
                return list(proc.children(recursive=True))
            except psutil.Error:
                return []
        found = []
        for pid in self._host.descendants(proc.pid):
            with contextlib.suppress(psutil.Error):  # it ended since the scan
                found.append(self._children.get(pid) or psutil.Process(pid))
        return found

    def _lost_children(self, alive: tuple[ChildInfo, ...]) -> tuple[ChildInfo, ...]:
        alive_pids = {c.pid for c in alive}
        return tuple(
            ChildInfo(c.pid, c.name, False)
            for pid, c in self._seen_children.items()
            if pid not in alive_pids
        )

    def _gone(self, status: str, code: int | None) -> ProcessReport:
        last = self._last
        assert self._pid is not None
        if last is None and code is None:
            status = "not-found"  # never seen alive: a wrong PID, or it died before we looked
        return ProcessReport(
            pid=self._pid,
            alive=False,
            status=status,
            name=last.name if last else "",
            cmdline=last.cmdline if last else "",
            create_time=self._create_time,
            exit_code=code,
            children_lost=tuple(
                ChildInfo(c.pid, c.name, False) for c in self._seen_children.values()
            ),
        )


def _cpu(proc: Any) -> float | None:
    try:
        return float(proc.cpu_percent(interval=None))
    except psutil.Error:
        return None


def _child_name(proc: Any) -> str:
    # SGLang names its ranks with setproctitle ("sglang::scheduler_TP3"), which shows in
    # the command line rather than in name().
    argv = _quiet(proc.cmdline, [])
    if argv and argv[0].startswith("sglang::"):
        return clean(str(argv[0]))
    return clean(str(_quiet(proc.name, "?")))


def _quiet(getter: Callable[[], Any], default: Any) -> Any:
    try:
        return getter()
    except (psutil.Error, OSError):
        return default

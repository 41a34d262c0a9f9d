"""Python stacks of a running process with ``py-spy dump``, as typed results that never raise.

py-spy (a dependency: its wheel ships the binary, installed beside the interpreter) reads a
process's memory to rebuild every thread's Python stack. ``dump --json --locals`` gives
frames innermost first, with each frame's arguments and locals (a loader's ``st_file``
names the shard it reads).

Pausing: by default py-spy stops the target (ptrace) for the few milliseconds it reads, so
the stack is consistent; that is the right trade for a one-shot dump of a process that
looks stuck (SGLang's own watchdog does the same). A process that is already stopped
(SIGSTOP, traced) or in uninterruptible disk wait cannot be paused (py-spy fails with
``Failed to suspend process``) and needs no pausing to be read consistently, so it is
dumped with ``--nonblocking``; so is one that another tracer holds. A blocking dump that
fails to suspend is retried nonblocking once.

When py-spy cannot attach (no ptrace permission: a container without ``SYS_PTRACE``,
another user's process) the result says so with the fix, once, as data.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from eagle_tui.core.proc import procfs

DEFAULT_TIMEOUT_S = 15.0
PERMISSION_FIX = (
    "py-spy needs ptrace permission: in a container add --cap-add SYS_PTRACE (docker run) "
    "or the SYS_PTRACE capability (Kubernetes securityContext); otherwise run as the "
    "server's user or root (and check /proc/sys/kernel/yama/ptrace_scope)"
)
_NO_PAUSE_STATES = frozenset("DTt")


class DumpStatus(StrEnum):
    """How a dump went."""

    OK = "ok"
    NO_PERMISSION = "no permission"
    NOT_PYTHON = "not a Python process"
    GONE = "process gone"
    TIMEOUT = "timed out"
    NO_PYSPY = "py-spy not found"
    FAILED = "failed"


@dataclass(frozen=True)
class Frame:
    """One Python frame: function, file (full path and py-spy's short form), line and the
    locals py-spy could show (name → repr, clipped)."""

    function: str
    filename: str
    short: str
    line: int
    locals: tuple[tuple[str, str], ...] = ()

    def local(self, name: str) -> str | None:
        """The repr of local ``name`` (quotes stripped from a string), if shown."""
        for key, value in self.locals:
            if key == name:
                return value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value
        return None

    def describe(self) -> str:
        """``load_weights (sglang/srt/models/llama.py:512)``."""
        return f"{self.function} ({self.short}:{self.line})"


@dataclass(frozen=True)
class ThreadStack:
    """One thread: its frames innermost first, and whether py-spy saw it running."""

    thread_id: int
    os_thread_id: int | None
    name: str | None
    active: bool
    owns_gil: bool
    frames: tuple[Frame, ...]


@dataclass(frozen=True)
class StackDump:
    """Every thread of one process, or why there is none (``status`` not OK; ``message``
    is py-spy's own error line, ``fix`` what to do about it)."""

    pid: int
    status: DumpStatus
    threads: tuple[ThreadStack, ...] = ()
    message: str = ""
    fix: str = ""
    nonblocking: bool = False
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        """A stack was taken."""
        return self.status is DumpStatus.OK

    @property
    def main(self) -> ThreadStack | None:
        """The main thread (its OS thread id is the PID), else the first thread."""
        for thread in self.threads:
            if thread.os_thread_id == self.pid or thread.name == "MainThread":
                return thread
        return self.threads[0] if self.threads else None


def find_pyspy() -> str | None:
    """The py-spy binary: beside this interpreter (its venv), in the scripts directory,
    then on PATH."""
    for folder in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        candidate = folder / "py-spy"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("py-spy")


def dump(
    pid: int,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    nonblocking: bool | None = None,
    with_locals: bool = True,
    pyspy: str | None = None,
) -> StackDump:
    """Dump ``pid``'s Python stacks. ``nonblocking`` None decides from the process state
    (see the module note); never raises."""
    binary = pyspy or find_pyspy()
    if binary is None:
        return StackDump(
            pid,
            DumpStatus.NO_PYSPY,
            message="py-spy is not installed",
            fix="pip install py-spy (eagle-tui depends on it)",
        )
    if nonblocking is None:
        nonblocking = _should_not_pause(pid)
    result, text = _run(binary, pid, timeout_s, nonblocking, with_locals)
    if not nonblocking and "Failed to suspend process" in text:
        result, _ = _run(binary, pid, timeout_s, True, with_locals)  # stopped since we looked
    return result


def _should_not_pause(pid: int) -> bool:
    stat = procfs.read_stat(pid)
    if stat is not None and stat.state in _NO_PAUSE_STATES:
        return True
    status = procfs.read_text(f"{procfs.PROC}/{pid}/status", 8192) or ""
    for line in status.splitlines():
        if line.startswith("TracerPid:"):
            return line.split(":", 1)[1].strip() not in ("", "0")
    return False


def _run(
    binary: str, pid: int, timeout_s: float, nonblocking: bool, with_locals: bool
) -> tuple[StackDump, str]:
    """One py-spy run: the dump, and py-spy's whole error text (empty on success)."""
    command = [binary, "dump", "--pid", str(pid), "--json"]
    command += ["--locals"] if with_locals else []
    command += ["--nonblocking"] if nonblocking else []
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        message = f"py-spy gave no stack in {timeout_s:g} s"
        return StackDump(pid, DumpStatus.TIMEOUT, message=message,
                         fix="try again; a process in disk wait may not be readable",
                         nonblocking=nonblocking, elapsed_s=timeout_s), ""  # fmt: skip
    except OSError as exc:
        return StackDump(pid, DumpStatus.FAILED, message=f"cannot run {binary}: {exc}"), ""
    elapsed = time.monotonic() - started
    if done.returncode == 0:
        try:
            threads = parse_json(json.loads(done.stdout))
        except (ValueError, TypeError, KeyError) as exc:
            return StackDump(pid, DumpStatus.FAILED, message=f"unreadable py-spy output: {exc}",
                             nonblocking=nonblocking, elapsed_s=elapsed), ""  # fmt: skip
        return StackDump(pid, DumpStatus.OK, threads, nonblocking=nonblocking,
                         elapsed_s=elapsed), ""  # fmt: skip
    text = done.stderr + done.stdout
    status, fix = classify_error(text)
    return StackDump(pid, status, message=_first_error(text), fix=fix,
                     nonblocking=nonblocking, elapsed_s=elapsed), text  # fmt: skip


def classify_error(text: str) -> tuple[DumpStatus, str]:
    """py-spy's failure text → what happened and the fix."""
    lowered = text.lower()
    if (
        "permission denied" in lowered
        or "operation not permitted" in lowered
        or ("os error 1)" in lowered or "os error 13)" in lowered)
    ):
        return DumpStatus.NO_PERMISSION, PERMISSION_FIX
    if (
        "failed to find python version" in lowered
        or "failed to find a python interpreter" in lowered
    ):
        return DumpStatus.NOT_PYTHON, "not a Python process: its stack needs gdb, not py-spy"
    if "no such process" in lowered or "check that the process is running" in lowered:
        return DumpStatus.GONE, ""
    return DumpStatus.FAILED, "run py-spy dump --pid PID by hand to see the whole error"


def _first_error(text: str) -> str:
    for line in text.splitlines():
        if line.strip() and not line.startswith((" ", "Stack backtrace")):
            return line.strip()[:300]
    return text.strip()[:300]


def parse_json(data: Any) -> tuple[ThreadStack, ...]:
    """``py-spy dump --json`` output (a list of threads) → stacks."""
    return tuple(_thread(item) for item in data)


def _thread(item: dict[str, Any]) -> ThreadStack:
    return ThreadStack(
        thread_id=int(item.get("thread_id") or 0),
        os_thread_id=item.get("os_thread_id"),
        name=item.get("thread_name"),
        active=bool(item.get("active")),
        owns_gil=bool(item.get("owns_gil")),
        frames=tuple(_frame(f) for f in item.get("frames") or ()),
    )


def _frame(item: dict[str, Any]) -> Frame:
    local_items = tuple(
        (str(v.get("name")), str(v.get("repr"))[:300]) for v in item.get("locals") or ()
    )
    return Frame(
        function=str(item.get("name")),
        filename=str(item.get("filename")),
        short=str(item.get("short_filename") or item.get("filename")),
        line=int(item.get("line") or 0),
        locals=local_items,
    )

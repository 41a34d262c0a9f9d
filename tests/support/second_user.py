"""A real second local user for shared-host tests: made with ``useradd``, removed after.

A GPU host is shared, so the tests that say "another user's process" or "another user's
file" use a real account, not a uid number borrowed from ``nobody``: the kernel's
ownership checks, /proc's permission rules and the socket table then answer as they would
on the host. The account is made by the test (a name unique to the process) and removed
with ``userdel`` at teardown, its home and mail spool with it; every process it still runs
is killed first, so no test leaves a stranger behind.

Where ``useradd`` is unavailable or we are not root, the fixture skips with that reason.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class LocalUser:
    """A real account on this host: its name, ids and home directory."""

    name: str
    uid: int
    gid: int
    home: Path
    started: list[subprocess.Popen[bytes]] = field(default_factory=list, compare=False)

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start ``argv`` as this user (the kernel's real and effective ids are theirs)."""
        env = kwargs.pop("env", None) or {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
            "USER": self.name, "LANG": "C.UTF-8",
        }
        process = subprocess.Popen(list(argv), user=self.uid, group=self.gid, extra_groups=[],
                                   env=env, cwd=str(self.home), **kwargs)
        self.started.append(process)  # killed and reaped at teardown
        return process

    def run(self, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        """Run ``argv`` as this user to its end (``check=True`` unless told otherwise)."""
        kwargs.setdefault("check", True)
        kwargs.setdefault("timeout", 60)
        env = kwargs.pop("env", None) or {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
            "USER": self.name, "LANG": "C.UTF-8",
        }
        return subprocess.run(list(argv), user=self.uid, group=self.gid, extra_groups=[],
                              env=env, cwd=str(self.home), **kwargs)

    def act(self, action: Callable[[], None]) -> None:
        """Run ``action`` in a forked child that has dropped to this user."""
        act_as(self.uid, self.gid, action, who=self.name)

    def python(self, code: str, **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start ``python -c code`` as this user (the interpreter of the test run)."""
        return self.popen([sys.executable, "-c", code], **kwargs)


def act_as(uid: int, gid: int, action: Callable[[], None], *, who: str) -> None:
    """Run ``action`` in a forked child whose uid and gid are ``uid``/``gid``; its failure
    fails the test (reported through the exit status and stderr)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            action()
            code = 0
        except BaseException as e:  # reported through the exit status
            print(f"as {who}: {type(e).__name__}: {e}", file=sys.stderr)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, f"the action as {who} failed"


def _unavailable() -> str | None:
    if os.geteuid() != 0:
        return "a second local user needs root (useradd)"
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        return "useradd/userdel are not installed on this host"
    return None


def _kill_all_of(uid: int) -> None:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue


@pytest.fixture
def second_user() -> Iterator[LocalUser]:
    """A fresh local account for this test, removed (with everything it runs) afterwards."""
    reason = _unavailable()
    if reason:
        pytest.skip(reason)
    name = f"eagt{os.getpid() % 100000}{int(time.monotonic() * 1000) % 1000}"
    made = subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", "--user-group",
                           name], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"useradd {name} failed: {made.stderr.strip()}")
    entry = pwd.getpwnam(name)
    user = LocalUser(name=name, uid=entry.pw_uid, gid=entry.pw_gid, home=Path(entry.pw_dir))
    user.home.chmod(0o755)  # so root's tests and the user's own processes both can cd there
    try:
        yield user
    finally:
        _kill_all_of(user.uid)
        for process in user.started:
            process.kill()
            process.wait(timeout=10)
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
        subprocess.run(["userdel", "--remove", "--force", name], capture_output=True,
                       check=False)

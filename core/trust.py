"""Is a directory or file safely ours? The ssh/gpg rule for state other users must not touch.

The state directory holds the registry of detached batches, and a batch record says which
servers get the API key, which tokenizer code runs (``trust_remote_code``) and which socket
the CLI talks to. Whoever can write a record can take a batch over, so eagle-tui uses one
only when nobody else could have written it:

- a **directory** must be ours (owner = our uid), not writable by group or others, and every
  directory above it owned by us or root and not writable by others unless sticky (like
  ``/tmp``: others cannot rename what is ours in it);
- a **file** must be a regular file (not a symlink), ours, and not writable by group or
  others;
- no **symlink** on the way may belong to anyone but us or root (a symlink owned by another
  user points wherever they like).

Each check returns ``None`` when all is well, else one sentence: what is wrong, where, and
the exact command that fixes it. Callers turn it into their error (``UntrustedState``).
Everything eagle-tui creates here is 0700 (directories) or 0600 (files).

A base module: it imports nothing of the project.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import stat
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


STATE_DIR_ELSEWHERE = "point EAGLE_TUI_STATE_DIR at it"


def dir_problem(path: Path, *, what: str, elsewhere: str = STATE_DIR_ELSEWHERE) -> str | None:
    """Why the existing directory ``path`` is not safely ours, or None (see the module doc).

    ``elsewhere`` ends the advice to use a directory of one's own (``mkdir -m 700 DIR and
    …``): how this caller is given another place."""
    uid = os.geteuid()
    problem = _symlink_problem(path, uid, what, elsewhere)
    if problem is not None:
        return problem
    real = Path(os.path.realpath(path))
    try:
        info = os.stat(real)
    except FileNotFoundError:
        return None  # nothing there to distrust; whoever creates it makes it private
    if not stat.S_ISDIR(info.st_mode):
        return f"{what} {path} is not a directory; move it away or set another place"
    return _holder_problem(
        f"{what} {path}", info, uid,
        not_yours=": that user could plant or change what eagle-tui reads there. Use a "
                  f"directory of your own: mkdir -m 700 DIR and {elsewhere}",
        writable=": another user could plant or replace what eagle-tui reads there. Fix: "
                 f"chmod 700 {_quote(real)}",
    ) or _ancestor_problem(real, uid, what, path, elsewhere)


def file_problem(path: Path, info: os.stat_result, *, what: str) -> str | None:
    """Why the file ``path`` (``info`` from ``lstat``/``fstat``) is not safely ours, or None."""
    if stat.S_ISLNK(info.st_mode):
        return (f"{what} {path} is a symlink; eagle-tui only reads plain files it wrote. "
                f"If you did not create it: rm {_quote(path)}")
    if not stat.S_ISREG(info.st_mode):
        return f"{what} {path} is not a regular file; remove it: rm {_quote(path)}"
    return _holder_problem(
        f"{what} {path}", info, os.geteuid(),
        not_yours=", so it was not written by your eagle-tui; refusing to use it. Remove it: "
                  f"rm {_quote(path)}",
        writable=f"; check it is yours, then: chmod 600 {_quote(path)}",
    )


def _holder_problem(named: str, info: os.stat_result, uid: int, *, not_yours: str,
                    writable: str) -> str | None:
    """``named`` (``what path``) is another user's, or others may write it: the fact, then
    the caller's advice (``not_yours``, ``writable``); None when neither."""
    if info.st_uid != uid:
        return f"{named} belongs to {_owner(info.st_uid)}, not to you ({_owner(uid)}){not_yours}"
    if info.st_mode & _OTHERS_WRITE:
        return (f"{named} is writable by {_who(info.st_mode)} "
                f"(mode {stat.S_IMODE(info.st_mode):o}){writable}")
    return None


PRIVATE_FILE_MAX_BYTES = 16 << 20
"""Largest record or state file read (they are a few KiB; see ``core.fsio.read_small``)."""


def read_private(path: Path, *, what: str) -> tuple[bytes, str | None]:
    """(contents, None) of a file that is safely ours, or (b"", why not).

    Opened without following a symlink and checked on the open descriptor, so the file
    cannot be swapped between the check and the read. FileNotFoundError passes through.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        problem = file_problem(path, os.fstat(fd), what=what)
        if problem is not None:
            return b"", problem
        chunks, size = [], 0
        while size <= PRIVATE_FILE_MAX_BYTES and (chunk := os.read(fd, 1 << 16)):
            chunks.append(chunk)
            size += len(chunk)
        if size > PRIVATE_FILE_MAX_BYTES:
            return b"", (f"{what} {path} is larger than {PRIVATE_FILE_MAX_BYTES >> 20} MiB, "
                         "more than one ever holds; delete it")
        return b"".join(chunks), None
    finally:
        os.close(fd)


def ensure_private_dir(path: Path, *, what: str) -> str | None:
    """Create ``path`` (mode 0700; missing parents as usual) unless it exists, then check it
    like :func:`dir_problem`; None when it is safely ours."""
    problem = _symlink_problem(path, os.geteuid(), what)
    if problem is not None:
        return problem
    if not os.path.lexists(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        # Made by someone else just now? Then it is checked below like any existing one.
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=PRIVATE_DIR_MODE)
    return dir_problem(path, what=what)


def _symlink_problem(path: Path, uid: int, what: str,
                     elsewhere: str = STATE_DIR_ELSEWHERE) -> str | None:
    """A symlink on the way to ``path`` owned by someone but us or root."""
    current = Path("/")
    for part in Path(os.path.abspath(path)).parts[1:]:
        step = current / part
        try:
            info = os.lstat(step)
        except FileNotFoundError:
            return None
        except NotADirectoryError:
            return None
        if stat.S_ISLNK(info.st_mode):
            if info.st_uid not in (uid, 0):
                return (f"{what} {path} is reached through the symlink {step}, which belongs "
                        f"to {_owner(info.st_uid)}: it could point anywhere. Remove the link "
                        f"(rm {_quote(step)}), or use a directory of your own: mkdir -m 700 "
                        f"DIR and {elsewhere}")
            step = Path(os.path.realpath(step))
        current = step
    return None


def _ancestor_problem(real: Path, uid: int, what: str, shown: Path,
                      elsewhere: str) -> str | None:
    """A directory above ``real`` that another user could use to replace it."""
    for parent in real.parents:
        info = os.stat(parent)
        if info.st_uid not in (uid, 0):
            return (f"{what} {shown} is inside {parent}, which belongs to "
                    f"{_owner(info.st_uid)}: that user could replace it. Use a directory "
                    f"under one you or root own: mkdir -m 700 DIR and {elsewhere}")
        if info.st_mode & _OTHERS_WRITE and not info.st_mode & stat.S_ISVTX:
            return (f"{what} {shown} is inside {parent}, which is writable by "
                    f"{_who(info.st_mode)} without the sticky bit (mode "
                    f"{stat.S_IMODE(info.st_mode):o}): anyone could replace it. Fix: chmod "
                    f"go-w {_quote(parent)} (or chmod +t), or mkdir -m 700 DIR elsewhere and "
                    f"{elsewhere}")
    return None


def _who(mode: int) -> str:
    if mode & stat.S_IWGRP and mode & stat.S_IWOTH:
        return "its group and everyone"
    return "its group" if mode & stat.S_IWGRP else "everyone"


def _owner(uid: int) -> str:
    try:
        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _quote(path: Path) -> str:
    text = str(path)
    return text if all(c.isalnum() or c in "/._-+@%:," for c in text) else f"'{text}'"

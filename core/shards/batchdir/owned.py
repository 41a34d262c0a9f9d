"""Only our own batch directory: the rule the control socket and the state directory follow.

A capture writes, truncates, appends to and renames files in its batch directory, as
whoever runs it (often root on a GPU host). In a directory another user owns or can write,
that user could plant a link at any of those names (``.eagle-tui.lock``,
``manifest.json.tmp``, ``capture.log``...) and have our process write through it. So the
directory must be ours and writable by nobody else, nor replaceable through a directory
above it (``core.trust.dir_problem``); and inside it, every file is opened without
following a link (``core.fsio``), as are the ``shards/`` and ``untrusted/`` folders.

Only the standard library and base modules: the lock (batch bookkeeping) uses it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from eagle_tui.core import trust
from eagle_tui.core.errors import UntrustedOutput

OUT_ELSEWHERE = "pass it as --out"
DIR_MODE = 0o755
"""Readable by teammates, writable by us alone (the umask can only take bits away)."""


def claim_batch_dir(out_dir: Path) -> None:
    """Create ``out_dir`` if missing, then refuse it unless it is safely ours
    (:class:`UntrustedOutput`, one line: what is wrong and the command that fixes it)."""
    problem = trust.dir_problem(out_dir, what="batch directory", elsewhere=OUT_ELSEWHERE)
    if problem is None and not os.path.lexists(out_dir):
        _make(out_dir)
        problem = trust.dir_problem(out_dir, what="batch directory", elsewhere=OUT_ELSEWHERE)
    if problem is not None:
        raise UntrustedOutput(problem)


def own_subdir(path: Path) -> Path:
    """``path`` (``shards/``, ``untrusted/``) as a real directory of ours, created if
    missing; UntrustedOutput when it is a link, not a directory, or someone else's."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=DIR_MODE)
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise UntrustedOutput(f"{path} is not a directory (a link or a file); eagle-tui "
                              f"writes only into the batch's own folders. Remove it: rm {path}")
    if info.st_uid != os.geteuid():
        raise UntrustedOutput(f"{path} belongs to uid {info.st_uid}, not to you; eagle-tui "
                              f"writes only into its own folders. Move it away: mv {path} "
                              f"{path}.theirs")
    return path


def _make(out_dir: Path) -> None:
    """mkdir -p with mode 0755 on every level made (``makedirs`` gives the parents 0777
    less the umask: with a umask of 0002 a group-writable parent, which is then refused)."""
    missing: list[Path] = []
    for level in (out_dir, *out_dir.parents):
        if os.path.lexists(level):
            break
        missing.append(level)
    for level in reversed(missing):
        try:
            level.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue  # made meanwhile by someone: checked like any existing directory

"""Where a batch's control socket lives, how it is bound privately, and who is calling.

The socket goes into the batch directory (``control.sock``) when that directory is safely
ours (``core.trust``: our own, writable by nobody else, nor anything above it). A Unix socket
path must fit in ``sun_path`` (108 bytes on Linux), and batch directories can be deep, so a
path that is too long, or a batch directory others could write, falls back to a private
per-user directory (``$XDG_RUNTIME_DIR/eagle-tui-<uid>`` or ``/tmp/eagle-tui-<uid>``, mode
0700, ours) under the batch id. The registry records the
path either way, so clients never guess.

Binding: the file is created under umask 0177 and chmod-ed 0600 *before* ``listen()``, so
there is no moment at which another user could connect. The server also checks every
connection's peer uid (``SO_PEERCRED``), which holds even if the file mode is later
loosened (or the caller is root, whom file modes do not stop).
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import tempfile
from pathlib import Path

from eagle_tui.core import trust
from eagle_tui.core.errors import BatchError, UntrustedSocket
from eagle_tui.core.shards.batchdir.layout import BatchDir

MAX_SOCKET_PATH = 107  # Linux sun_path is 108 bytes including the terminating NUL
SOCKET_MODE = 0o600


def control_socket_path(out_dir: Path, batch_id: str) -> Path:
    """``BatchDir.control_socket`` (``out_dir/control.sock``) when that fits in
    ``sun_path`` and ``out_dir`` is safely ours (or will be created by us), else a private
    fallback."""
    preferred = BatchDir(out_dir).control_socket
    place = out_dir if out_dir.exists() else out_dir.parent
    private = trust.dir_problem(place, what="batch directory") is None
    if private and len(os.fsencode(preferred)) <= MAX_SOCKET_PATH:
        return preferred
    fallback = private_runtime_dir() / f"{batch_id}.sock"
    if len(os.fsencode(fallback)) > MAX_SOCKET_PATH:
        raise BatchError(f"no short enough place for a control socket ({fallback}); set "
                         "XDG_RUNTIME_DIR or TMPDIR to a shorter directory")
    return fallback


def private_runtime_dir() -> Path:
    """A directory only we can enter, for sockets (created 0700; refused if not ours)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    directory = Path(base) / f"eagle-tui-{os.getuid()}"
    directory.mkdir(mode=0o700, exist_ok=True)
    info = directory.lstat()
    if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid()
            or stat.S_IMODE(info.st_mode) & 0o077):
        raise UntrustedSocket(
            f"{directory} is not a private directory of ours (owner uid {info.st_uid}, mode "
            f"{stat.S_IMODE(info.st_mode):o}); remove it or set XDG_RUNTIME_DIR")
    return directory


def bind_private_socket(path: Path, *, backlog: int = 64) -> socket.socket:
    """A listening Unix socket at ``path``, mode 0600 before anyone can connect.

    A stale socket file at ``path`` is replaced (the caller holds the batch lock, so no
    live worker can own it); any other kind of file there is an error.
    """
    _remove_stale(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        previous = os.umask(0o177)
        try:
            sock.bind(os.fspath(path))
        finally:
            os.umask(previous)
        os.chmod(path, SOCKET_MODE)  # explicit: some file systems ignore the umask
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _remove_stale(path: Path) -> None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise BatchError(f"{path} exists and is not a socket; move it away so the batch "
                         "worker can create its control socket there")
    path.unlink()


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (None where unsupported)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:  # not Linux: the 0600 file mode is the only guard
        return None
    size = struct.calcsize("3i")
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, size))
    return int(uid)


def check_socket_is_ours(path: Path) -> None:
    """Refuse to talk to anything at ``path`` but a socket owned by us.

    FileNotFoundError passes through (the caller decides what a missing socket means).
    """
    info = path.lstat()
    if not stat.S_ISSOCK(info.st_mode):
        raise UntrustedSocket(f"{path} is not a socket; it is not a batch control endpoint")
    if info.st_uid != os.getuid():
        raise UntrustedSocket(
            f"control socket {path} belongs to uid {info.st_uid}, not to you (uid "
            f"{os.getuid()}); refusing to talk to another user's batch worker")

"""The weight, cache and lock files a process has open, and how their read positions move.

Reading every descriptor's target each second would cost more than the rest of a sample
(an SGLang rank holds dozens of sockets, pipes and eventfds), so targets are remembered by
descriptor number: a new number is looked up at once, a remembered evidence file is
re-checked every sample through its fdinfo (whose inode changes when the number is reused,
as it is when a loader closes one shard and opens the next), any other path is looked up
again every sample (a number that held a ``.pyc`` during imports may hold a shard next),
and sockets, pipes and anonymous inodes every ``refresh_every`` samples. History per file
keeps the last position and since when it has not moved, which is what "0 B/s for 50 s"
needs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from eagle_tui.core.proc import procfs
from eagle_tui.core.proc.evidence import FileEvidence, FileKind

WEIGHT_SUFFIXES = (".safetensors", ".gguf")
"""Always weights, whatever their size (a test model's shard is under a megabyte)."""
MAYBE_WEIGHT_SUFFIXES = (
    ".bin", ".pt", ".pth", ".ckpt", ".npz", ".npy", ".h5", ".msgpack", ".tensors",
)  # fmt: skip
"""Weights from a megabyte up (Python's ``.pth`` path files share the suffix)."""
CACHE_MARKERS = (
    "/flashinfer", "/.deep_gemm", "/deep_gemm", "/triton/", "/.triton/", "torchinductor",
    "/tvm", "/.cache/sglang", "/huggingface/", "/modelscope/", "/torch_extensions/",
)  # fmt: skip
LARGE_BYTES = 64 * 1024 * 1024
_NOT_EVIDENCE = (".so", ".py", ".pyc", ".log", ".txt", ".json")
"""A read-only regular file this big is evidence whatever its name (a weight blob)."""


@dataclass
class _Target:
    path: str
    ino: int | None
    kind: FileKind | None
    size: int | None


@dataclass
class _History:
    position: int
    moved_at: float
    seen_at: float


def file_kind(path: str, size: int | None, writable: bool) -> FileKind | None:
    """Why ``path`` is evidence, or None when it is not (sockets, libraries, logs)."""
    if not path.startswith("/") or path.startswith(("/dev/", "/proc/", "/sys/")):
        return None
    clean = path.removesuffix(" (deleted)")
    if clean.endswith(".lock"):
        return FileKind.LOCK
    big = size is not None and size >= 1024 * 1024
    if clean.endswith(WEIGHT_SUFFIXES) or "/blobs/" in clean:
        return FileKind.WEIGHTS
    if clean.endswith(MAYBE_WEIGHT_SUFFIXES) and big and not writable:
        return FileKind.WEIGHTS
    if any(marker in clean for marker in CACHE_MARKERS):
        return FileKind.CACHE
    if clean.endswith(_NOT_EVIDENCE):
        return None
    if not writable and size is not None and size >= LARGE_BYTES:
        return FileKind.LARGE
    return None


class FileTracker:
    """Open files of one process, remembered between samples."""

    def __init__(self, pid: int, *, refresh_every: int = 30) -> None:
        self.pid = pid
        self._refresh_every = refresh_every
        self._samples = 0
        self._targets: dict[int, _Target] = {}
        self._evidence: set[int] = set()
        self._transient: set[int] = set()
        self._history: dict[tuple[int, str], _History] = {}
        self.sockets: frozenset[int] = frozenset()
        """Inodes of the process's sockets (the peer count ties connections to it)."""

    def sample(self, now: float, interval: float | None) -> tuple[FileEvidence, ...] | None:
        """The process's evidence files now; None when its descriptors are hidden."""
        fds = procfs.list_fds(self.pid)
        if fds is None:
            return None
        current = set(fds)
        known = self._targets.keys()
        if self._samples % self._refresh_every == 0:
            relook = current
        else:
            relook = (current - known) | (self._transient & current)
        self._samples += 1
        gone = known - current
        for fd in gone:
            self._drop(fd)
        for fd in relook:
            self._look(fd)
        found = [
            evidence
            for fd in sorted(self._evidence)
            if (evidence := self._file(fd, self._targets[fd], now, interval)) is not None
        ]
        if relook or gone:
            self.sockets = frozenset(
                int(t.path[8:-1]) for t in self._targets.values() if t.path.startswith("socket:[")
            )
        self._forget_closed(found)
        return tuple(found)

    def _drop(self, fd: int) -> None:
        self._targets.pop(fd, None)
        self._evidence.discard(fd)
        self._transient.discard(fd)

    def _look(self, fd: int) -> _Target | None:
        path = procfs.fd_target(self.pid, fd)
        self._drop(fd)
        if path is None:
            return None
        target = _Target(path, None, None, None)
        if _is_file(path):
            info = procfs.read_fdinfo(self.pid, fd)
            size = _size(path)
            writable = info.writable if info else False
            kind = file_kind(path, size, writable)
            target = _Target(path, info.ino if info else None, kind, size)
            (self._evidence if kind is not None else self._transient).add(fd)
        self._targets[fd] = target
        return target

    def _file(
        self, fd: int, target: _Target, now: float, interval: float | None
    ) -> FileEvidence | None:
        info = procfs.read_fdinfo(self.pid, fd)
        if info is None:
            return None
        if info.ino is not None and target.ino is not None and info.ino != target.ino:
            fresh = self._look(fd)  # the number now names another file
            if fresh is None or fresh.kind is None:
                return None
            target = fresh
        key = (fd, target.path)
        history = self._history.get(key)
        rate: float | None = None
        if history is None:
            history = self._history[key] = _History(info.pos, now, now)
        else:
            if interval:
                rate = max(0.0, (info.pos - history.position) / interval)
            if info.pos != history.position:
                history.position, history.moved_at = info.pos, now
        if target.size is not None and info.pos > target.size:
            target.size = _size(target.path)  # a file being written grows
        assert target.kind is not None
        return FileEvidence(
            path=target.path,
            kind=target.kind,
            fd=fd,
            size=target.size,
            position=info.pos,
            bytes_per_s=rate,
            still_s=now - history.moved_at,
            writable=info.writable,
            still_known=history.moved_at > history.seen_at,  # it moved while watched
        )

    def _forget_closed(self, found: list[FileEvidence]) -> None:
        alive = {(f.fd, f.path) for f in found if f.fd is not None}
        for key in [k for k in self._history if k not in alive]:
            del self._history[key]


class MappedFiles:
    """Weight files a process has mapped (safetensors maps each shard and closes the
    descriptor), read at most every ``every_s`` seconds: ``/proc/PID/maps`` is costly."""

    def __init__(self, pid: int, *, every_s: float = 10.0) -> None:
        self.pid = pid
        self._every_s = every_s
        self._read_at: float | None = None
        self._first_seen: dict[str, float] = {}
        self._sizes: dict[str, int | None] = {}

    def sample(self, now: float, wanted: bool) -> tuple[FileEvidence, ...]:
        """The mapped weight files; re-read only when ``wanted`` and ``every_s`` has passed
        (otherwise the last answer, aged)."""
        due = self._read_at is None or now - self._read_at >= self._every_s
        if wanted and due:
            self._read_at = now
            mapped = procfs.mapped_files(self.pid, WEIGHT_SUFFIXES + MAYBE_WEIGHT_SUFFIXES) or []
            names = {path for path, _ in mapped}
            self._first_seen = {p: self._first_seen.get(p, now) for p in names}
            self._sizes = {p: self._sizes.get(p) or _size(p) for p in names}
        return tuple(
            FileEvidence(path, FileKind.WEIGHTS, None, self._sizes.get(path), None, None, now - t,
                         still_known=False)  # mapped before the first look, for all we know
            for path, t in sorted(self._first_seen.items())
        )


def _is_file(target: str) -> bool:
    """A file on a file system (one a loader may close, its number reused for the next),
    as opposed to a socket, pipe, anonymous inode or device, which live as long as the
    process and are looked up again only every ``refresh_every`` samples."""
    return target.startswith("/") and not target.startswith(("/dev/", "/proc/", "/sys/"))


def _size(path: str) -> int | None:
    try:
        return os.stat(path.removesuffix(" (deleted)")).st_size
    except OSError:
        return None

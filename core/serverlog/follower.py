"""Follow a growing log file like ``tail -F``, without ever raising.

- Starts an existing file at its last start-up (the last ``server_args=`` line, looked for
  in its last ``START_SCAN_BYTES``), so a long log of a server that has served for hours
  still gives the whole start-up timeline: that start-up up to its "ready" line, then the
  bounded tail (what it served in between is skipped: the tail says how it is now). Without
  a start-up before the tail, from the tail alone (its first, cut line is dropped); or from
  the beginning when asked (a log eagle-tui itself just created).
- Splits on ``\\r`` as well as ``\\n``: tqdm progress bars rewrite one line with ``\\r``,
  and the newest bar state is the unterminated tail, returned as ``partial``.
- Survives rotation (the path now names another file: the old one is read to its end
  first, then the new one from its start) and truncation (the file shrank, or was
  rewritten in place: detected by re-reading the bytes just before our offset).
- A missing or unreadable file is reported in ``LogChunk.error`` and retried next time.

Like ``tail -F``, it cannot recover a file that was rotated in and out again between two
reads, nor lines a truncation removed before they were read; read every second or so.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from eagle_tui.core.errors import UnfitFile
from eagle_tui.core.fsio import open_regular

_TERMINATORS = re.compile(rb"[\r\n]")
_FINGERPRINT_BYTES = 64


@dataclass(frozen=True)
class LogChunk:
    """What one ``read`` found.

    ``lines`` are the complete lines since the last read, in order; ``partial`` is the
    unterminated tail (re-sent on every read until it is terminated); ``notes`` say what
    happened to the file (``"rotated"``, ``"truncated"``, ``"opened"``); ``error`` is the
    current problem reading it, or ``None``; ``mtime`` is the file's modification time
    (when its newest byte was written: it dates a backlog).
    """

    lines: tuple[str, ...] = ()
    partial: str = ""
    notes: tuple[str, ...] = ()
    error: str | None = None
    mtime: float | None = None


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


START_MARKER = b"server_args="
"""The line every SGLang start-up prints first (after launch warnings)."""
START_SCAN_BYTES = 64 * 1024 * 1024
"""How far back from the end a start-up is looked for when attaching to a long log."""
READY_MARKER = b"The server is fired up and ready to roll"
START_LEAD_BYTES = 4096
"""Read this much before ``server_args=`` too: the launch prints warnings and dated lines
(``Automatically detected platform cuda.``) first, and they date the launch."""
_SCAN_CHUNK = 1024 * 1024


def last_start_offset(handle: BinaryIO, size: int, limit: int = START_SCAN_BYTES) -> int | None:
    """The offset of the line holding the last ``server_args=`` within ``limit`` bytes of
    the end (read backwards in chunks), or None."""
    fd, end, floor = handle.fileno(), size, max(0, size - limit)
    overlap = len(START_MARKER) - 1
    while end > floor:
        start = max(floor, end - _SCAN_CHUNK)
        chunk = os.pread(fd, end - start + overlap, start)
        found = chunk.rfind(START_MARKER)
        if found >= 0:
            line_start = max(chunk.rfind(b"\n", 0, found), chunk.rfind(b"\r", 0, found)) + 1
            if line_start > 0:
                return start + line_start
            return _line_start(fd, start + found)
        end = start
    return None


def line_end_after(handle: BinaryIO, marker: bytes, start: int, stop: int) -> int | None:
    """The offset just past the line holding the first ``marker`` in ``[start, stop)``."""
    fd, at = handle.fileno(), start
    while at < stop:
        chunk = os.pread(fd, min(_SCAN_CHUNK, stop - at) + len(marker) - 1, at)
        found = chunk.find(marker)
        if found >= 0:
            end = _terminator_after(chunk, found)
            return None if end is None or at + end + 1 > stop else at + end + 1
        at += _SCAN_CHUNK
    return None


def _terminator_after(chunk: bytes, found: int) -> int | None:
    ends = [i for i in (chunk.find(b"\n", found), chunk.find(b"\r", found)) if i >= 0]
    return min(ends) if ends else None


def _line_start(fd: int, at: int) -> int:
    """The start of the line holding byte ``at`` (scanning back from it)."""
    while at > 0:
        start = max(0, at - _SCAN_CHUNK)
        chunk = os.pread(fd, at - start, start)
        cut = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        if cut >= 0:
            return start + cut + 1
        at = start
    return 0


class LogFollower:
    """Tail one log file across rotation and truncation; call ``read`` on every tick."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        tail_bytes: int = 256 * 1024,
        from_start: bool = False,
        max_read_bytes: int = 4 * 1024 * 1024,
        max_partial_bytes: int = 1024 * 1024,
    ) -> None:
        self.path = Path(path)
        self._tail_bytes: int | None = None if from_start else tail_bytes
        self._max_read = max_read_bytes
        self._max_partial = max_partial_bytes
        self._file: BinaryIO | None = None
        self._identity: tuple[int, int] | None = None
        self._offset = 0
        self._pending = b""
        self._fingerprint = b""
        self._skip_first_line = False
        self._skip_to: tuple[int, int] | None = None  # (from, to): served lines skipped
        self._opened_before = False
        # Open now, so a rotation before the first read does not hide the current file.
        self._open_notes: list[str] = []
        with contextlib.suppress(OSError, UnfitFile):
            if self._stat_path() is not None:
                self._open(self._open_notes)

    def close(self) -> None:
        """Close the file handle (``read`` would reopen it)."""
        if self._file is not None:
            self._file.close()
        self._file = None

    def __enter__(self) -> LogFollower:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(self) -> LogChunk:
        """Everything new since the last call; never raises."""
        lines: list[str] = []
        notes, self._open_notes = self._open_notes, []
        try:
            error = self._read_into(lines, notes)
        except OSError as exc:
            self.close()
            error = f"cannot read {self.path}: {exc.strerror or exc}"
        except UnfitFile as exc:  # a FIFO or device where the log was: never block on it
            self.close()
            error = f"cannot read the log: {exc}"
        return LogChunk(tuple(lines), _decode(self._pending), tuple(notes), error, self._mtime())

    def _mtime(self) -> float | None:
        if self._file is None:
            return None
        try:
            return os.fstat(self._file.fileno()).st_mtime
        except OSError:
            return None

    def _read_into(self, lines: list[str], notes: list[str]) -> str | None:
        path_identity = self._stat_path()
        if self._file is not None and path_identity != self._identity:
            # Rotated (or removed): finish the old file before looking at the new one.
            self._check_truncation(lines, notes)
            self._drain(lines)
            self._flush_pending(lines)
            self.close()
            if path_identity is not None:
                notes.append("rotated")
        if self._file is None:
            if path_identity is None:
                return f"log file {self.path} does not exist (yet)"
            self._open(notes)
        self._check_truncation(lines, notes)
        self._read_available(lines, self._max_read)
        if self._skip_to is not None and self._offset >= self._skip_to[0]:
            # On to the tail in the same read: its newest line dates the whole backlog.
            self._read_available(lines, self._max_read)
        return None

    def _stat_path(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_dev, st.st_ino)

    def _open(self, notes: list[str]) -> None:
        # kept open across reads on purpose; a FIFO or device is refused without blocking
        handle = os.fdopen(open_regular(self.path, "log file"), "rb")
        st = os.fstat(handle.fileno())
        self._file = handle
        self._identity = (st.st_dev, st.st_ino)
        self._pending = b""
        self._fingerprint = b""
        start = 0
        tail = self._tail_bytes
        if not self._opened_before and tail is not None and st.st_size > tail:
            start = st.st_size - tail
            last_start = last_start_offset(handle, st.st_size)
            if last_start is not None and last_start < start:
                # The whole start-up, not its end alone (the first, cut line is dropped).
                ready_end = line_end_after(handle, READY_MARKER, last_start, start)
                if ready_end is not None:
                    self._skip_to = (ready_end, start)
                start = max(0, last_start - START_LEAD_BYTES)
                self._skip_first_line = start > 0 and (
                    os.pread(handle.fileno(), 1, start - 1) not in (b"\n", b"\r"))
            else:
                # The first line is cut unless the tail starts right after a terminator.
                self._skip_first_line = (
                    os.pread(handle.fileno(), 1, start - 1) not in (b"\n", b"\r"))
        self._opened_before = True
        self._offset = start
        handle.seek(start)
        notes.append("opened")

    def _check_truncation(self, lines: list[str], notes: list[str]) -> None:
        assert self._file is not None
        size = os.fstat(self._file.fileno()).st_size
        if size >= self._offset and self._fingerprint_matches():
            return
        self._flush_pending(lines)
        self._offset = 0
        self._fingerprint = b""
        self._skip_first_line = False
        self._file.seek(0)
        notes.append("truncated")

    def _fingerprint_matches(self) -> bool:
        if not self._fingerprint:
            return True
        assert self._file is not None
        length = len(self._fingerprint)
        seen = os.pread(self._file.fileno(), length, self._offset - length)
        return seen == self._fingerprint

    def _drain(self, lines: list[str]) -> None:
        while self._read_available(lines, self._max_read):
            pass

    def _read_available(self, lines: list[str], limit: int) -> bool:
        assert self._file is not None
        if self._skip_to is not None:
            skip_from, skip_to = self._skip_to
            if self._offset >= skip_from:
                self._skip_served(skip_to)
            else:
                limit = min(limit, skip_from - self._offset)
        self._file.seek(self._offset)
        data = self._file.read(limit)
        if not data:
            return False
        self._offset += len(data)
        self._fingerprint = (self._fingerprint + data)[-_FINGERPRINT_BYTES:]
        self._split(self._pending + data, lines)
        return True

    def _skip_served(self, to: int) -> None:
        """Go on from the tail at ``to``: the start-up is read, what it served is not."""
        assert self._file is not None
        self._skip_to = None
        self._pending = b""
        self._fingerprint = b""
        self._offset = to
        self._skip_first_line = os.pread(self._file.fileno(), 1, to - 1) not in (b"\n", b"\r")

    def _split(self, buffer: bytes, lines: list[str]) -> None:
        last = max(buffer.rfind(b"\n"), buffer.rfind(b"\r"))
        complete, self._pending = buffer[: last + 1], buffer[last + 1 :]
        for raw in _TERMINATORS.split(complete):
            if not raw:
                continue
            if self._skip_first_line:
                self._skip_first_line = False
                continue
            lines.append(_decode(raw))
        if len(self._pending) > self._max_partial:
            self._flush_pending(lines)

    def _flush_pending(self, lines: list[str]) -> None:
        """Emit the unterminated tail as a line (the file moved on without ending it)."""
        if self._pending and not self._skip_first_line:
            lines.append(_decode(self._pending))
        self._pending = b""
        self._skip_first_line = False

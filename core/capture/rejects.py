"""``rejects.jsonl``: one JSON line per prompt record that could not be used.

Each line is a ``Reject`` struct, ``{"source", "line", "reason", "sample_id"}`` (sample_id
null when the record had none we could read). Lines are flushed as written, so a crash loses
none. A resumed batch re-reads its prompt file and meets the same bad records again; entries
already in the file (same source and line) are not written twice.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import TracebackType
from typing import IO

import msgspec

from eagle_tui.core.errors import ConfigError
from eagle_tui.core.fsio import open_append, open_read_own
from eagle_tui.core.wire import json_line, parse_json_line


class Reject(msgspec.Struct, frozen=True):
    """A prompt record that was not used: where it is and why (a line of ``rejects.jsonl``)."""

    source: str
    line: int
    reason: str
    sample_id: str | None = None

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.reason}"


class RejectLog:
    """Appends rejects to a JSONL file, one flushed line each, skipping ones already there.

    ``count`` is the number of distinct rejects in the file (earlier runs included).
    """

    def __init__(self, path: str | Path) -> None:
        """Open (creating if needed) ``path`` for appending; ConfigError if it cannot be."""
        self.path = Path(path)
        try:
            self._seen, torn = _existing_keys(self.path)
            # backslashreplace: text from a prompt file may hold lone surrogates; never
            # through a link at its name (fsio.open_append)
            self._handle: IO[str] = open(  # noqa: SIM115 (held open)
                open_append(self.path, "rejects file"), "a", encoding="utf-8",
                errors="backslashreplace")
            if torn:
                self._handle.write("\n")  # keep the next entry off a line torn by a crash
                self._handle.flush()
        except OSError as e:
            raise ConfigError(f"cannot write rejects file {self.path}: {e.strerror or e}") from e

    @property
    def count(self) -> int:
        """Distinct rejects recorded in the file."""
        return len(self._seen)

    def write(self, reject: Reject) -> bool:
        """Append ``reject`` and flush; False (nothing written) when it is already logged."""
        key = (reject.source, reject.line)
        if key in self._seen:
            return False
        self._handle.write(json_line(reject) + "\n")
        self._handle.flush()
        self._seen.add(key)
        return True

    def close(self) -> None:
        """Close the file (idempotent; a write error was reported when it happened)."""
        with contextlib.suppress(OSError):  # flushing what a full disk refused
            self._handle.close()

    def __enter__(self) -> RejectLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _existing_keys(path: Path) -> tuple[set[tuple[str, int]], bool]:
    """(source, line) of every reject already in ``path`` (a torn last line is ignored),
    and whether the file ends torn (non-empty, its last byte not a newline)."""
    keys: set[tuple[str, int]] = set()
    fd = open_read_own(path, "rejects file")  # UnsafeFile (an OSError) for a link
    if fd is None:
        return keys, False
    text = ""
    with open(fd, encoding="utf-8", errors="replace") as handle:
        for text in handle:
            # a line torn by a crash is skipped: the record will be logged again
            if (reject := parse_json_line(text, Reject)) is not None:
                keys.add((reject.source, reject.line))
    return keys, bool(text) and not text.endswith("\n")

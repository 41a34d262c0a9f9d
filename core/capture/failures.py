"""``failures.jsonl``: rows that failed permanently in the latest run, one JSON line each.

A failed row is never in a shard, so the next resume retries it by itself; this file is
the human-readable account of why. At the start of each run the previous run's file is
kept as ``failures.previous.jsonl`` and a fresh one begins, so ``failures.jsonl`` always
describes the latest attempt. Lines are flushed as written; a crash can tear at most the
last one, which readers skip.

Messages come from the error tree, which never carries credentials.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from eagle_tui.core.errors import ConfigError

FAILURES_NAME = "failures.jsonl"
PREVIOUS_NAME = "failures.previous.jsonl"


@dataclass(frozen=True, slots=True)
class Failure:
    """One row that could not be captured: which, where from, what went wrong, where."""

    sample_id: str
    source: str
    line: int
    kind: str
    reason: str
    attempts: int
    endpoint: str | None
    rid: str | None
    at: float


class FailureLog:
    """Appends failures to ``<out_dir>/failures.jsonl`` (rotating the previous run's away)."""

    def __init__(self, out_dir: Path) -> None:
        """Start a fresh log in ``out_dir``; ConfigError when it cannot be written."""
        self.path = out_dir / FAILURES_NAME
        self.count = 0
        try:
            if self.path.exists() and self.path.stat().st_size > 0:
                os.replace(self.path, out_dir / PREVIOUS_NAME)
            # backslashreplace: a server's message may hold lone surrogates
            self._handle: IO[str] = open(  # noqa: SIM115 (held open)
                self.path, "w", encoding="utf-8", errors="backslashreplace")
        except OSError as e:
            raise ConfigError(f"cannot write failures file {self.path}: {e.strerror or e}") from e

    def write(self, failure: Failure) -> None:
        """Append ``failure`` and flush it."""
        self._handle.write(json.dumps(asdict(failure), ensure_ascii=False) + "\n")
        self._handle.flush()
        self.count += 1

    def close(self) -> None:
        """Close the file (idempotent; a write error was reported when it happened)."""
        with contextlib.suppress(OSError):  # flushing what a full disk refused
            self._handle.close()


def read_failures(path: Path) -> Iterator[Failure]:
    """The failures in ``path``; lines torn by a crash or of another shape are skipped."""
    if not path.exists():
        return
    with open(path, encoding="utf-8", errors="replace") as handle:
        for text in handle:
            try:
                yield Failure(**json.loads(text))
            except (ValueError, TypeError):
                continue

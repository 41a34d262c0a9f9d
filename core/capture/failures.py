"""``failures.jsonl``: rows that failed permanently in the latest run, one JSON line each.

A failed row is never in a shard, so the next resume retries it by itself; this file is
the human-readable account of why. At the start of each run the previous run's file is
kept as ``failures.previous.jsonl`` and a fresh one begins, so ``failures.jsonl`` always
describes the latest attempt. Lines are flushed as written; a crash can tear at most the
last one, which readers skip.

Rows that failed for a reason a resend cannot fix (:data:`NOT_RETRIED_ON_RESUME`: the prompt
does not fit the context) are not sent again on resume: ``FailureLog(carry=True)`` reads
them from the previous run's file before rotating it (``carried``), and the engine writes
them into the new file again, so they stay counted as failed. ``--retry-failed`` sends them
anyway (after raising the server's context length, say).

Messages come from the error tree, which never carries credentials. Each line is a
``Failure`` struct; one that does not fit it (a torn line, another shape) is skipped.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import msgspec

from eagle_tui.core.errors import ConfigError
from eagle_tui.core.fsio import UnsafeFile, create_new, open_read_own, unsafe_to_write
from eagle_tui.core.shards.batchdir.layout import BatchDir
from eagle_tui.core.wire import json_line, parse_json_line

NOT_RETRIED_ON_RESUME = frozenset({"context_too_long"})
"""Failure kinds a resume leaves failed unless asked (``--retry-failed``)."""


class Failure(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
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
    """Appends failures to the batch's ``failures.jsonl`` (rotating the previous run's away)."""

    def __init__(self, out_dir: Path, *, carry: bool = False) -> None:
        """Start a fresh log in ``out_dir``; ConfigError when it cannot be written.

        ``carry``: keep the previous run's failures of a kind in NOT_RETRIED_ON_RESUME in
        ``carried`` (by sample id) before the file is rotated.
        """
        batch = BatchDir(out_dir)
        self.path = batch.failures
        self.count = 0
        self.carried: dict[str, Failure] = {}
        if carry:
            self.carried = {f.sample_id: f for f in read_failures(self.path)
                            if f.kind in NOT_RETRIED_ON_RESUME}
        try:
            if _has_lines(self.path):
                os.replace(self.path, batch.previous_failures)
            # backslashreplace: a server's message may hold lone surrogates; created new,
            # never through a link at its name (fsio.create_new)
            self._handle: IO[str] = open(  # noqa: SIM115 (held open)
                create_new(self.path, "failures file"), "w", encoding="utf-8",
                errors="backslashreplace")
        except OSError as e:
            raise ConfigError(f"cannot write failures file {self.path}: {e.strerror or e}") from e

    def write(self, failure: Failure) -> None:
        """Append ``failure`` and flush it."""
        self._handle.write(json_line(failure) + "\n")
        self._handle.flush()
        self.count += 1

    def close(self) -> None:
        """Close the file (idempotent; a write error was reported when it happened)."""
        with contextlib.suppress(OSError):  # flushing what a full disk refused
            self._handle.close()


def _has_lines(path: Path) -> bool:
    """True when ``path`` is a non-empty regular file of ours (UnsafeFile, an OSError, for
    a link or anything else at its name: it is neither read nor rotated)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    problem = unsafe_to_write(info, path, "failures file")
    if problem is not None:
        raise UnsafeFile(problem)
    return info.st_size > 0


def read_failures(path: Path) -> Iterator[Failure]:
    """The failures in ``path``; lines torn by a crash or of another shape are skipped.
    Never read through a link (ConfigError for one, or for another user's file)."""
    try:
        fd = open_read_own(path, "failures file")
    except OSError as e:
        raise ConfigError(f"cannot read failures file {path}: {e.strerror or e}") from e
    if fd is None:
        return
    with open(fd, encoding="utf-8", errors="replace") as handle:
        for text in handle:
            if (failure := parse_json_line(text, Failure)) is not None:
                yield failure


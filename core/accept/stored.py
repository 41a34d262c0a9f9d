"""Stored acceptance results, so a later run can say "fell 0.21 since the last drafter".

A results file holds JSON Lines, one :class:`StoredResult` each, oldest first (by default
``accept-results.jsonl`` beside the batch or prompt file). A result is only comparable with one
of the same :class:`ResultKey`: the same target model, speculative config, prompt set and
sampling, since acceptance depends on every one of them. Appending rewrites the file
atomically, so a crash leaves the old results whole; a file that does not parse is an error,
never overwritten.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec

from eagle_tui.core.accept.alarms import Alarm, fell
from eagle_tui.core.accept.config import SpecConfig
from eagle_tui.core.accept.summary import AcceptReport, summary_problem
from eagle_tui.core.errors import AcceptResultError, UnfitFile
from eagle_tui.core.fsio import MIB, describe_os_error, fsync_dir, read_small, write_atomic

MAX_RESULTS_BYTES = 64 * MIB
"""Largest stored-results file read (a result is a few KiB: this is thousands of runs)."""

RESULTS_FILE = "accept-results.jsonl"
RESULT_VERSION = 1


class ResultKey(msgspec.Struct, frozen=True):
    """What must match for two results to be compared: the target model (its path as the
    server reports it), the speculative config, the prompt set (:func:`prompt_set_id`) and
    the sampling."""

    target: str
    spec: SpecConfig
    prompt_set: str
    temperature: float
    max_new_tokens: int


class StoredResult(msgspec.Struct, frozen=True):
    """One replay's report with its key, the server it ran on, when (ISO 8601, UTC) and a
    free label (e.g. the drafter's name)."""

    key: ResultKey
    server: str
    created_at: str
    report: AcceptReport
    label: str = ""
    version: int = RESULT_VERSION


class CategoryChange(msgspec.Struct, frozen=True):
    """A category's accept length before (stored) and now; ``change`` = now - before."""

    category: str
    before: float | None
    now: float | None
    change: float | None


class Comparison(msgspec.Struct, frozen=True):
    """The current result against a stored one (when, its label, the server it measured):
    the change per category (``overall`` first), and a ``fell`` alarm for every fall of more
    than 0.1."""

    previous_created_at: str
    previous_label: str
    changes: list[CategoryChange]
    alarms: list[Alarm]
    previous_server: str = ""


def prompt_set_id(keys: Iterable[str]) -> str:
    """``sha256:`` + 16 hex digits over the sorted distinct prompt keys (sample ids): the
    same set of prompts gives the same id whatever their order."""
    digest = hashlib.sha256("\n".join(sorted(set(keys))).encode("utf-8")).hexdigest()
    return f"sha256:{digest[:16]}"


def load_results(path: Path) -> list[StoredResult]:
    """Every result in ``path``, oldest first; an empty list when the file does not exist."""
    try:
        data = read_small(path, MAX_RESULTS_BYTES, "acceptance results file")
    except FileNotFoundError:
        return []
    except UnfitFile as error:
        raise AcceptResultError(f"cannot read stored acceptance results: {error}; move it "
                                "away", path=path) from error
    except OSError as error:
        raise AcceptResultError(
            f"{path}: cannot read stored acceptance results ({describe_os_error(error)})",
            path=path,
        ) from error
    return [_decode(line, path, number)
            for number, line in enumerate(data.splitlines(), start=1) if line.strip()]


def append_result(path: Path, *results: StoredResult) -> None:
    """Add ``results`` to ``path`` (created if missing), in one atomic replacement of the
    file; a file that does not parse is left as it is (AcceptResultError)."""
    previous = load_results(path)
    lines = [msgspec.json.encode(r) for r in [*previous, *results]]
    try:
        write_atomic(path, b"\n".join(lines) + b"\n")
        fsync_dir(path.parent)
    except OSError as error:
        raise AcceptResultError(
            f"{path}: cannot store the acceptance result ({describe_os_error(error)}); "
            "the results stored before are unchanged",
            path=path,
        ) from error


def latest_comparable(results: Sequence[StoredResult], key: ResultKey) -> StoredResult | None:
    """The newest stored result with the same key, if any."""
    for result in reversed(results):
        if result.key == key:
            return result
    return None


def compare(previous: StoredResult, current: StoredResult) -> Comparison:
    """The change of every category's accept length since ``previous``; ValueError when the
    two results do not share a key (comparing them would mean nothing)."""
    if previous.key != current.key:
        raise ValueError("results of different targets, configs, prompt sets or sampling")
    before = {"overall": previous.report.overall, **previous.report.categories}
    now = {"overall": current.report.overall, **current.report.categories}
    changes: list[CategoryChange] = []
    alarms: list[Alarm] = []
    for name in ["overall", *sorted((set(before) | set(now)) - {"overall"})]:
        old = before[name].accept_length if name in before else None
        new = now[name].accept_length if name in now else None
        delta = None if old is None or new is None else new - old
        changes.append(CategoryChange(name, old, new, delta))
        alarm = fell(name, old, new)
        if alarm is not None:
            alarms.append(alarm)
    return Comparison(previous.created_at, previous.label, changes, alarms,
                      previous_server=previous.server)


def _decode(line: bytes, path: Path, number: int) -> StoredResult:
    try:
        result = msgspec.json.decode(line, type=StoredResult)
    except msgspec.ValidationError as error:
        raise AcceptResultError(
            f"{path}:{number}: not a stored acceptance result ({error}); move the file away "
            "or fix that line",
            path=path,
        ) from error
    except msgspec.DecodeError as error:
        raise AcceptResultError(
            f"{path}:{number}: not JSON ({error}); move the file away or fix that line",
            path=path,
        ) from error
    problem = _report_problem(result.report)
    if problem:
        raise AcceptResultError(
            f"{path}:{number}: a stored acceptance result with impossible figures ({problem}); "
            "move the file away or remove that line", path=path)
    if result.version != RESULT_VERSION:
        raise AcceptResultError(
            f"{path}:{number}: a result of format version {result.version}; this eagle-tui "
            f"reads version {RESULT_VERSION}",
            path=path,
        )
    return result


def _report_problem(report: AcceptReport) -> str | None:
    """The first category of ``report`` whose figures real answers cannot give."""
    for name, summary in [("overall", report.overall), *report.categories.items()]:
        problem = summary_problem(name, summary)
        if problem:
            return problem
    return None


__all__ = [
    "RESULTS_FILE",
    "RESULT_VERSION",
    "CategoryChange",
    "Comparison",
    "ResultKey",
    "StoredResult",
    "append_result",
    "compare",
    "latest_comparable",
    "load_results",
    "prompt_set_id",
]

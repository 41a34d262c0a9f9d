"""``eagle-tui accept``'s library call: replay a prompt set, report acceptance, keep results.

``measure(settings)`` replays the prompts on ``server`` (and on ``against`` for an A/B, one
server after the other so the two never share the machine), reports each side per category
(``core.accept.summary``), the A/B difference with its 95 % bootstrap interval
(``core.accept.ab``), each server's alarms (1.00 per verify step; no verify step at all: the
server does not speculate), and compares each side's figures with the last stored result of
the same target, config, prompt set and sampling (``core.accept.stored``), then stores them
(unless asked only to compare). With ``--against`` both sides are stored, the label on B's
(the server measured against A: the drafter being tried), A's unlabelled. ``--from-batch``
replays exactly the batch's held-out split (``core.accept.heldout``), from the batch's own
prompt file and tokenizer.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from msgspec import UnsetType

from eagle_tui.core.accept.ab import Difference, differences_by_category
from eagle_tui.core.accept.alarms import Alarm, not_speculating, stuck_at_one
from eagle_tui.core.accept.config import SpecConfig, spec_config
from eagle_tui.core.accept.figures import AcceptFigure
from eagle_tui.core.accept.heldout import held_out_ids
from eagle_tui.core.accept.stored import (
    RESULTS_FILE,
    Comparison,
    ResultKey,
    StoredResult,
    append_result,
    compare,
    latest_comparable,
    load_results,
    prompt_set_id,
)
from eagle_tui.core.accept.summary import AcceptReport, CategorySummary, report
from eagle_tui.core.capture.prompts import PromptRecord, open_prompts
from eagle_tui.core.capture.replay import ReplayRun, ReplaySettings, check_reachable, replay
from eagle_tui.core.errors import ConfigError, EagleError
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.urls import ServerURL


@dataclass(frozen=True)
class AcceptSettings:
    """What ``accept`` was asked: the replay (``only`` set from the batch's held-out split),
    the A/B server, the results file compared with (None: none), whether this run is added
    to it (``store``), a label (of B's result with ``against``, else of A's)."""

    replay: ReplaySettings
    against: ServerURL | None = None
    results: Path | None = None
    label: str = ""
    batch: Path | None = None
    store: bool = True


class Failure(msgspec.Struct, frozen=True):
    """A prompt that got no answer."""

    sample_id: str
    reason: str


class SideResult(msgspec.Struct, frozen=True):
    """One server's replay: its config, its figures overall and per category, what failed,
    its alarms (1.00 per verify step; no verify step at all; a fall against its stored
    result), and that comparison."""

    server: str
    target: str
    spec: SpecConfig
    overall: CategorySummary
    categories: dict[str, CategorySummary]
    failures: list[Failure]
    alarms: list[Alarm]
    elapsed_s: float
    comparison: Comparison | None = None


class AcceptOutcome(msgspec.Struct, frozen=True):
    """What ``accept --json`` prints: the first server's ``overall`` and ``categories`` at
    the top (``n``, ``accept_length`` and the rest), the other side (with its own
    comparison) and the differences for an A/B, the comparison with the stored result, the
    results file compared with, where this run was stored (None: ``--no-store``) and the
    label (of B's result in an A/B)."""

    server: str
    target: str
    spec: SpecConfig
    prompt_set: str
    held_out: bool
    overall: CategorySummary
    categories: dict[str, CategorySummary]
    failures: list[Failure]
    alarms: list[Alarm]
    against: SideResult | None = None
    differences: dict[str, Difference | None] | None = None
    comparison: Comparison | None = None
    stored_in: str | None = None
    compared_with: str | None = None
    label: str = ""


def from_batch(batch: Path, settings: ReplaySettings, *,
               tokenizer: Path | None = None) -> ReplaySettings:
    """The replay of a batch's held-out split: its prompt file, its tokenizer unless given,
    and only the prompts the split holds (ConfigError when the batch declares none)."""
    manifest = Manifest.load(batch)
    fraction = manifest.config.extra.held_out
    if isinstance(fraction, UnsetType) or not fraction:
        raise ConfigError(f"{batch} declares no held-out split; capture it with --held-out "
                          "FRACTION, or pass --prompts FILE to replay a prompt file")
    prompts = Path(manifest.config.prompt_file)
    ids = held_out_ids((r.sample_id for r in _records(prompts)), fraction)
    if not ids:
        raise ConfigError(f"{batch}: its held-out split ({fraction:g}) holds no prompt of "
                          f"{prompts}")
    return replace(settings, prompts=prompts, only=ids,
                   tokenizer=tokenizer or Path(manifest.config.tokenizer_path))


def _records(prompts: Path) -> list[PromptRecord]:
    return [r for r in open_prompts(prompts) if isinstance(r, PromptRecord)]


async def measure(settings: AcceptSettings) -> AcceptOutcome:
    """Replay, report, compare, store (see the module docstring); ConfigError before
    anything is sent when the prompt file is unusable or a server does not answer."""
    open_prompts(settings.replay.prompts)  # checked first: a bad file is the first thing to fix
    for url in (settings.replay.server, settings.against):
        if url is not None:
            await check_reachable(url, settings.replay.api_key)
    first = _believable(await replay(settings.replay), settings.replay.server)
    side = _side(first, settings.replay.server)
    other: ReplayRun | None = None
    if settings.against is not None:
        other = _believable(await replay(replace(settings.replay, server=settings.against)),
                            settings.against)
    keys = [r.key for r in first.requests]
    outcome = AcceptOutcome(
        server=side.server, target=side.target, spec=side.spec,
        prompt_set=prompt_set_id(keys), held_out=settings.replay.only is not None,
        overall=side.overall, categories=side.categories, failures=side.failures,
        alarms=side.alarms, label=settings.label)
    if other is not None and settings.against is not None:
        outcome = msgspec.structs.replace(
            outcome, against=_side(other, settings.against),
            differences=await asyncio.to_thread(
                differences_by_category, first.requests, other.requests))
    if settings.results is not None:
        outcome = await asyncio.to_thread(_compare_and_store, settings, outcome)
    return outcome


def _believable(run: ReplayRun, server: ServerURL) -> ReplayRun:
    """``run``, unless an answer came with acceptance counts no server produces: then the
    server (or what stands between it and us) lies, none of its figures is measured and
    nothing is stored (EagleError naming the first such answer)."""
    lies = [f for f in run.failures if f.impossible_counts]
    if not lies:
        return run
    more = f" (and {len(lies) - 1} more)" if len(lies) > 1 else ""
    raise EagleError(
        f"{server}: prompt {lies[0].sample_id}{more}: {lies[0].reason}; nothing "
        "was measured or stored. Is it SGLang's own /generate, with nothing between that "
        "rewrites answers?")


def _side(run: ReplayRun, server: ServerURL) -> SideResult:
    config = spec_config(run.server_info)
    summary: AcceptReport = report(run.requests)
    answered = summary.overall
    alarms = [a for a in [_stuck(answered, config),
                          not_speculating(server.public, config, answered.n,
                                          answered.verify_steps)] if a is not None]
    return SideResult(
        server=server.public, target=_target(run.server_info), spec=config,
        overall=summary.overall, categories=summary.categories,
        failures=[Failure(f.sample_id, f.reason) for f in run.failures],
        alarms=alarms, elapsed_s=run.elapsed_s)


def _stuck(overall: CategorySummary, config: SpecConfig) -> Alarm | None:
    """The 1.00 alarm over the replay: tokens per verify step without the prefill token
    (1 + accepted drafts per step) is what a drafter that never hits reads as 1.00."""
    if overall.verify_steps == 0 or overall.accept_rate is None:
        return None
    figure = AcceptFigure(accept_length=overall.accept_length or 0.0, source="metrics",
                          window="this replay", accept_rate=overall.accept_rate)
    return stuck_at_one(figure, config)


def _target(server_info: dict[str, Any] | Any) -> str:
    path = server_info.get("model_path") if hasattr(server_info, "get") else None
    return path if isinstance(path, str) else ""


def _compare_and_store(settings: AcceptSettings, outcome: AcceptOutcome) -> AcceptOutcome:
    """Each side against the last stored result of its key (stored before this run), then
    both added in one write unless ``settings.store`` is off."""
    path = settings.results
    assert path is not None
    stored = load_results(path)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    b = outcome.against
    current = _result(settings, outcome, outcome, now,
                      label="" if b is not None else settings.label)
    comparison = _compared(stored, current)
    results = [current]
    if b is not None:
        theirs = _result(settings, outcome, b, now, label=settings.label)
        b_comparison = _compared(stored, theirs)
        b = msgspec.structs.replace(b, comparison=b_comparison,
                                    alarms=[*b.alarms, *_fell(b_comparison)])
        results.append(theirs)
    if settings.store:
        append_result(path, *results)
    return msgspec.structs.replace(
        outcome, against=b, comparison=comparison, alarms=[*outcome.alarms, *_fell(comparison)],
        stored_in=str(path) if settings.store else None, compared_with=str(path),
        label=settings.label)


def _result(settings: AcceptSettings, outcome: AcceptOutcome,
            side: AcceptOutcome | SideResult, now: str, *, label: str) -> StoredResult:
    """``side``'s result, keyed by its own target and config on the run's prompt set."""
    key = ResultKey(target=side.target, spec=side.spec, prompt_set=outcome.prompt_set,
                    temperature=settings.replay.temperature,
                    max_new_tokens=settings.replay.max_new_tokens)
    return StoredResult(key=key, server=side.server, created_at=now,
                        report=AcceptReport(side.overall, side.categories), label=label)


def _compared(stored: list[StoredResult], current: StoredResult) -> Comparison | None:
    previous = latest_comparable(stored, current.key)
    return compare(previous, current) if previous is not None else None


def _fell(comparison: Comparison | None) -> list[Alarm]:
    return comparison.alarms if comparison is not None else []


def default_results_path(settings: ReplaySettings, batch: Path | None) -> Path:
    """``accept-results.jsonl`` beside the batch, else beside the prompt file."""
    return (batch if batch is not None else settings.prompts.parent) / RESULTS_FILE


__all__ = [
    "AcceptOutcome",
    "AcceptSettings",
    "Failure",
    "SideResult",
    "default_results_path",
    "from_batch",
    "measure",
]

"""Replaying a prompt set against a speculative-decoding server, to measure acceptance.

``replay(settings)`` sends every selected prompt once, the way a capture does: the same
rendering (``render.Renderer``: the target's chat template, the vocabulary check), the same
pool, least-loaded dispatch and health admission (``servers``, ``dispatch``,
``healthloop``), the same retries and request ids (``sender``), exact prompt ids through the
native ``/generate`` (the only route whose ``meta_info`` has the ``spec_*`` fields). Nothing
is written: each answer becomes a :class:`~eagle_tui.core.accept.summary.ReplayedRequest`
(its sample id, the record's ``category``, its acceptance and output ids) for
``core.accept`` to summarise. A prompt that fails for good is counted and named, never
guessed at.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msgspec import UNSET

from eagle_tui.core.accept.config import spec_config
from eagle_tui.core.accept.requests import IMPOSSIBLE, request_acceptance
from eagle_tui.core.accept.summary import ReplayedRequest
from eagle_tui.core.capture.config import CaptureConfig, RetryPolicy
from eagle_tui.core.capture.control import RunControl
from eagle_tui.core.capture.dispatch import ServerPool
from eagle_tui.core.capture.healthloop import HealthMonitor
from eagle_tui.core.capture.progress import ProgressTracker
from eagle_tui.core.capture.prompts import PromptRecord, Reject, open_prompts
from eagle_tui.core.capture.render import Job, Renderer
from eagle_tui.core.capture.sender import Sender, sampling_params
from eagle_tui.core.capture.servers import ClientFactory, open_pool
from eagle_tui.core.clock import Clock, SystemClock
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.sampling import SamplingPreset
from eagle_tui.core.sglang import ClientTimeouts, SGLangClient
from eagle_tui.core.tokenizer import LoadedTokenizer, load_tokenizer
from eagle_tui.core.urls import ServerURL

log = logging.getLogger(__name__)

REACH_TIMEOUTS = ClientTimeouts(connect=5.0, health=10.0, info=10.0)
UNCATEGORISED = "uncategorised"
"""The category of a prompt record without a ``category`` field."""


@dataclass(frozen=True)
class ReplaySettings:
    """One replay: which prompts (``only``: a set of sample ids to keep, e.g. a batch's
    held-out split), which server, how to sample."""

    prompts: Path
    tokenizer: Path
    server: ServerURL
    max_new_tokens: int = 512
    temperature: float = 0.0
    concurrency: int = 16
    request_timeout_s: float = 600.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    api_key: str | None = field(default=None, repr=False)
    only: frozenset[str] | None = None
    health_retry_s: float = 0.5


@dataclass(frozen=True)
class ReplayFailure:
    """A prompt that got no answer (or could not be sent): where and why;
    ``impossible_counts`` when the answer came with acceptance counts no server produces
    (``core.accept.requests.count_problem``)."""

    sample_id: str
    reason: str
    impossible_counts: bool = False


@dataclass(frozen=True)
class ReplayRun:
    """What one replay produced: the answers, the failures, the server's ``/server_info``
    (raw, for the speculative config and the target) and the wall time."""

    requests: tuple[ReplayedRequest, ...]
    failures: tuple[ReplayFailure, ...]
    server_info: Mapping[str, Any]
    elapsed_s: float


@dataclass(frozen=True)
class _Prepared:
    jobs: tuple[tuple[Job, str], ...]  # each with its category
    rejects: tuple[ReplayFailure, ...]
    stop_ids: tuple[int, ...]


def prepare_jobs(settings: ReplaySettings, tokenizer: LoadedTokenizer) -> _Prepared:
    """Render the selected prompts (blocking: run it in a thread)."""
    boundaries = tokenizer.boundary_ids()
    renderer = Renderer(tokenizer, vocab_size=tokenizer.vocab_bound(),
                        think_id=boundaries.think)
    preset = SamplingPreset("", temperature=settings.temperature)
    jobs: list[tuple[Job, str]] = []
    rejects: list[ReplayFailure] = []
    for record in _selected(open_prompts(settings.prompts), settings.only):
        if isinstance(record, Reject):
            rejects.append(ReplayFailure(record.sample_id or f"line {record.line}",
                                         record.reason))
            continue
        ids = renderer.render(record)
        if isinstance(ids, Reject):
            rejects.append(ReplayFailure(record.sample_id, ids.reason))
            continue
        job = Job(record.sample_id, preset, ids, record.source, record.line)
        jobs.append((job, record.category or UNCATEGORISED))
    return _Prepared(tuple(jobs), tuple(rejects), tuple(boundaries.stop))


def _selected(records: Iterable[PromptRecord | Reject],
              only: frozenset[str] | None) -> Iterable[PromptRecord | Reject]:
    for record in records:
        if only is None or (record.sample_id is not None and record.sample_id in only):
            yield record


async def replay(
    settings: ReplaySettings,
    *,
    tokenizer: LoadedTokenizer | None = None,
    clock: Clock | None = None,
    client_factory: ClientFactory | None = None,
) -> ReplayRun:
    """Send every selected prompt once (with the capture's retries) and collect the answers."""
    clock = clock or SystemClock()
    if tokenizer is None:
        tokenizer = await asyncio.to_thread(load_tokenizer, settings.tokenizer)
    prepared = await asyncio.to_thread(prepare_jobs, settings, tokenizer)
    if not prepared.jobs:
        raise ConfigError(f"{settings.prompts}: no prompt to replay "
                          f"({len(prepared.rejects)} could not be rendered or read)")
    config = _capture_config(settings)
    started = clock.monotonic()
    async with open_pool(config, clock, client_factory) as pool:
        sender = _sender(pool, settings, prepared, clock)
        monitor = asyncio.create_task(HealthMonitor(
            pool, clock, interval_s=config.health_interval_s,
            paused_interval_s=config.health_retry_s).run())
        try:
            info = await _server_info(pool)  # first: its draft config bounds the counts
            draft_tokens = spec_config(info).num_draft_tokens
            answers = await _send_all(sender, prepared, settings.concurrency, clock,
                                      draft_tokens)
        finally:
            monitor.cancel()
            await asyncio.gather(monitor, return_exceptions=True)
            await sender.drain_background()
    requests = tuple(a for a in answers if isinstance(a, ReplayedRequest))
    failures = prepared.rejects + tuple(a for a in answers if isinstance(a, ReplayFailure))
    return ReplayRun(requests, failures, info, clock.monotonic() - started)


async def check_reachable(url: ServerURL, api_key: str | None = None) -> None:
    """ConfigError unless ``url`` answers ``/server_info`` (a replay would otherwise wait for
    a server that is not there)."""
    async with SGLangClient(url, api_key=api_key, timeouts=REACH_TIMEOUTS) as client:
        try:
            await client.server_info()
        except Exception as error:
            raise ConfigError(f"{url} does not answer /server_info ({error}); start "
                              "the server or check the URL") from error


def _capture_config(settings: ReplaySettings) -> CaptureConfig:
    """The capture settings the pool, the clients and the sender read (nothing is written:
    ``out_dir`` is never opened)."""
    return CaptureConfig(
        prompts=settings.prompts, out_dir=settings.prompts.parent, servers=(settings.server,),
        tokenizer=settings.tokenizer, max_new_tokens=settings.max_new_tokens,
        concurrency=settings.concurrency, request_timeout_s=settings.request_timeout_s,
        retry=settings.retry, health_retry_s=settings.health_retry_s,
        api_key=settings.api_key or UNSET)


def _sender(pool: ServerPool, settings: ReplaySettings, prepared: _Prepared,
            clock: Clock) -> Sender:
    preset = SamplingPreset("", temperature=settings.temperature)
    sampling = {preset.name: sampling_params(preset, max_new_tokens=settings.max_new_tokens,
                                             stop_token_ids=prepared.stop_ids, extra={})}
    control = RunControl()
    return Sender(pool, sampling=sampling, retry=settings.retry,
                  timeout_s=settings.request_timeout_s, control=control,
                  progress=ProgressTracker(clock), clock=clock)


async def _send_all(sender: Sender, prepared: _Prepared, concurrency: int, clock: Clock,
                    draft_tokens: int | None) -> list[ReplayedRequest | ReplayFailure]:
    queue: asyncio.Queue[tuple[Job, str]] = asyncio.Queue()
    for item in prepared.jobs:
        queue.put_nowait(item)
    answers: list[ReplayedRequest | ReplayFailure] = []

    async def worker() -> None:
        while not queue.empty():
            job, category = queue.get_nowait()
            answers.append(await _send_one(sender, job, category, clock, draft_tokens))

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(prepared.jobs)))))
    return answers


async def _send_one(sender: Sender, job: Job, category: str, clock: Clock,
                    draft_tokens: int | None) -> ReplayedRequest | ReplayFailure:
    started = clock.monotonic()
    outcome = await sender.send(job)
    finished = clock.monotonic()
    if outcome.kind != "ok" or outcome.result is None:
        return ReplayFailure(job.sample_id, outcome.reason or outcome.kind)
    result = outcome.result
    meta = dict(result.meta)
    meta.setdefault("completion_tokens", len(result.output_ids))
    try:
        acceptance = request_acceptance(meta, draft_tokens=draft_tokens,
                                        output_tokens=len(result.output_ids))
    except ValueError as error:
        return ReplayFailure(job.sample_id, f"the answer's meta_info is unusable: {error}",
                             impossible_counts=str(error).startswith(IMPOSSIBLE))
    return ReplayedRequest(job.sample_id, category, acceptance, tuple(result.output_ids),
                           started, finished)


async def _server_info(pool: ServerPool) -> Mapping[str, Any]:
    """The first server's raw ``/server_info`` (empty when it does not answer)."""
    try:
        info = await pool.servers[0].client.server_info()
    except Exception as error:  # best effort: the figures stand without it
        log.warning("no /server_info from %s: %s", pool.servers[0].url, error)
        return {}
    return info.raw


__all__ = [
    "UNCATEGORISED",
    "ReplayFailure",
    "ReplayRun",
    "ReplaySettings",
    "check_reachable",
    "prepare_jobs",
    "replay",
]

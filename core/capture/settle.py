"""Where each job's outcome goes: a validated row to the shards, a failure to
``failures.jsonl``, a rejected prompt to ``rejects.jsonl``; counted and reported as events."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from msgspec import UNSET

from eagle_tui.core.accept.config import spec_config
from eagle_tui.core.accept.requests import (
    MAX_DRAFT_TOKENS,
    RequestAcceptance,
    request_acceptance,
)
from eagle_tui.core.capture.dispatch import Server, ServerPool
from eagle_tui.core.capture.events import CaptureEvent, EventSink, RequestEvent
from eagle_tui.core.capture.failures import Failure, FailureLog
from eagle_tui.core.capture.progress import ProgressTracker
from eagle_tui.core.capture.prompts import Reject, RejectLog
from eagle_tui.core.capture.render import Job
from eagle_tui.core.capture.rows import RowBuilder
from eagle_tui.core.capture.sender import Outcome
from eagle_tui.core.capture.sink import ShardSink
from eagle_tui.core.clock import Clock
from eagle_tui.core.fsio import describe_os_error
from eagle_tui.core.shards.schema import ShardRow

log = logging.getLogger(__name__)


class Settler:
    """Records outcomes; one per run, used by every worker (event loop only)."""

    def __init__(
        self,
        *,
        rows: RowBuilder,
        sink: ShardSink,
        failures: FailureLog,
        rejects: RejectLog,
        progress: ProgressTracker,
        clock: Clock,
        presets: int,
        redact: Callable[[str], str],
        events: EventSink | None = None,
        on_fatal: Callable[[str], None] = lambda reason: None,
        on_row: Callable[[ShardRow], None] | None = None,
        draft_tokens: int | None = None,
    ) -> None:
        """``draft_tokens``: the most draft tokens any server runs with (None: unknown),
        the bound of an answer's drafts per verify step."""
        self._rows = rows
        self._sink = sink
        self._failures = failures
        self._rejects = rejects
        self._progress = progress
        self._clock = clock
        self._presets = presets
        self._redact = redact
        self._events = events
        self._on_fatal = on_fatal
        self._on_row = on_row
        self._draft_tokens = draft_tokens

    async def settle(self, job: Job, outcome: Outcome, extra_flags: tuple[str, ...] = ()) -> (
        bool
    ):
        """Store, log or count ``outcome`` of ``job``; True when a row was stored."""
        if outcome.kind == "interrupted":
            self._progress.interrupted += 1  # left for the next resume
        elif outcome.kind == "failed":
            self.failed(job, outcome)
        else:
            return await self._store(job, outcome, extra_flags)
        return False

    async def _store(self, job: Job, outcome: Outcome, extra_flags: tuple[str, ...]) -> bool:
        assert outcome.result is not None and outcome.endpoint and outcome.rid
        endpoint = outcome.endpoint
        acceptance = acceptance_of(outcome.result.meta, len(outcome.result.output_ids),
                                   self._draft_tokens)
        try:
            row = self._rows.build(job, outcome.result, endpoint, outcome.rid, extra_flags,
                                   acceptance)
        except OverflowError:  # an id beyond int32 cannot be stored; it is garbage anyway
            self.failed(job, Outcome(
                "failed", outcome.attempts, endpoint=outcome.endpoint, rid=outcome.rid,
                error_kind="bad_response",
                reason="server returned an output id outside the int32 range"))
            return False
        await self._sink.add(row)
        if self._on_row is not None:  # e.g. a worker keeping recent rows for spot-checks
            self._on_row(row)
        flags = tuple(row.flags)
        output_len = len(outcome.result.output_ids)
        self._progress.row_done(output_len, flags)
        self._emit(RequestEvent(kind="finished", sample_id=job.sample_id,
                                at=self._clock.wall(), rid=outcome.rid, endpoint=endpoint,
                                attempt=outcome.attempts, total=output_len, flags=flags,
                                acceptance=acceptance or UNSET))
        return True

    def failed(self, job: Job, outcome: Outcome) -> None:
        """Record a row that failed for good (the next resume retries it)."""
        kind = outcome.error_kind or "unknown"
        reason = self._redact(outcome.reason or kind)
        endpoint = outcome.endpoint or None
        try:
            self._failures.write(Failure(
                sample_id=job.sample_id, source=job.source, line=job.line, kind=kind,
                reason=reason, attempts=outcome.attempts, endpoint=endpoint, rid=outcome.rid,
                at=self._clock.wall()))
        except OSError as e:  # not in a shard: the next resume sends it again
            self._write_failed(self._failures.path, e)
            return
        self._progress.row_failed(kind)
        self._emit(RequestEvent(kind="failed", sample_id=job.sample_id,
                                at=self._clock.wall(), rid=outcome.rid, endpoint=endpoint,
                                attempt=outcome.attempts, error_kind=kind, detail=reason))

    def rejected(self, reject: Reject, rows: int | None = None) -> None:
        """Record a prompt refused before sending (one rejected row per preset, or
        ``rows``: a conversation's turn is one row)."""
        try:
            self._rejects.write(reject)
        except OSError as e:  # the next resume meets the record again
            self._write_failed(self._rejects.path, e)
            return
        self._progress.rejected += self._presets if rows is None else rows
        sample_id = reject.sample_id or f"{reject.source}:{reject.line}"
        self._emit(RequestEvent(kind="rejected", sample_id=sample_id, at=self._clock.wall(),
                                error_kind="rejected", detail=reject.reason))

    def still_failed(self, job: Job) -> None:
        """A row that failed permanently before and is not resent: recorded and counted
        as failed again (its previous failure, unchanged)."""
        failure = self._failures.carried.get(job.sample_id)
        if failure is None:
            return
        try:
            self._failures.write(failure)
        except OSError as e:
            self._write_failed(self._failures.path, e)
            return
        self._progress.row_failed(failure.kind)
        self._emit(RequestEvent(kind="failed", sample_id=job.sample_id, at=self._clock.wall(),
                                endpoint=failure.endpoint, attempt=failure.attempts,
                                error_kind=failure.kind,
                                detail=f"{failure.reason} (not resent; --retry-failed does)"))

    def skipped(self, rows: int) -> None:
        """Count rows found done in earlier runs."""
        self._progress.already_done += rows

    def _write_failed(self, path: Path, error: OSError) -> None:
        """A bookkeeping file cannot be written: stop the batch (what is saved is safe)."""
        self._progress.interrupted += self._presets if path == self._rejects.path else 1
        self._on_fatal(f"cannot write {path}: {describe_os_error(error)}; free space (or fix "
                       "the error) and resume the batch")

    def _emit(self, event: CaptureEvent) -> None:
        if self._events is not None:
            self._events(event)


def acceptance_of(meta: Mapping[str, Any], output_tokens: int,
                  draft_tokens: int | None = None) -> RequestAcceptance | None:
    """A speculative answer's acceptance (``spec_*`` in its ``meta_info``), else None; None
    too when its counts are malformed or impossible for the ``output_tokens`` received and
    the servers' ``draft_tokens`` (``core.accept.requests.count_problem``): they say nothing
    true, the ids still do."""
    if "spec_verify_ct" not in meta:
        return None
    try:
        return request_acceptance(meta, output_tokens=output_tokens, draft_tokens=draft_tokens)
    except ValueError:
        return None


async def draft_tokens_of(pool: ServerPool, timeout_s: float = 10.0) -> int | None:
    """The most ``speculative_num_draft_tokens`` the pool's servers report in
    ``/server_info`` (None when none reports it, or one does not answer: then only the
    absolute bound holds, never a tighter one than some server may use)."""
    async def one(server: Server) -> int | None:
        async with asyncio.timeout(timeout_s):
            info = await server.client.server_info()
        return spec_config(info.raw).num_draft_tokens

    try:
        found = await asyncio.gather(*(one(s) for s in pool.servers))
    except Exception as error:  # best effort: the counts are still checked against each other
        log.info("no draft config from every server (%s); acceptance counts are bounded by "
                 "%d drafts per step", error, MAX_DRAFT_TOKENS)
        return None
    return None if any(n is None for n in found) else max(n for n in found if n is not None)

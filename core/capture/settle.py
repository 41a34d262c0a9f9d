"""Where each job's outcome goes: a validated row to the shards, a failure to
``failures.jsonl``, a rejected prompt to ``rejects.jsonl``; counted and reported as events."""

from __future__ import annotations

from collections.abc import Callable

from eagle_tui.core.capture.config import public_url
from eagle_tui.core.capture.events import CaptureEvent, EventSink
from eagle_tui.core.capture.failures import Failure, FailureLog
from eagle_tui.core.capture.progress import ProgressTracker
from eagle_tui.core.capture.prompts import Reject, RejectLog
from eagle_tui.core.capture.render import Job
from eagle_tui.core.capture.rows import RowBuilder
from eagle_tui.core.capture.sender import Outcome
from eagle_tui.core.capture.sink import ShardSink
from eagle_tui.core.clock import Clock
from eagle_tui.core.shards.schema import ShardRow


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
        on_row: Callable[[ShardRow], None] | None = None,
    ) -> None:
        self._rows = rows
        self._sink = sink
        self._failures = failures
        self._rejects = rejects
        self._progress = progress
        self._clock = clock
        self._presets = presets
        self._redact = redact
        self._events = events
        self._on_row = on_row

    async def settle(self, job: Job, outcome: Outcome) -> None:
        """Store, log or count ``outcome`` of ``job``."""
        if outcome.kind == "interrupted":
            self._progress.interrupted += 1  # left for the next resume
        elif outcome.kind == "failed":
            self.failed(job, outcome)
        else:
            await self._store(job, outcome)

    async def _store(self, job: Job, outcome: Outcome) -> None:
        assert outcome.result is not None and outcome.endpoint and outcome.rid
        endpoint = public_url(outcome.endpoint)
        try:
            row = self._rows.build(job, outcome.result, endpoint, outcome.rid)
        except OverflowError:  # an id beyond int32 cannot be stored; it is garbage anyway
            self.failed(job, Outcome(
                "failed", outcome.attempts, endpoint=outcome.endpoint, rid=outcome.rid,
                error_kind="bad_response",
                reason="server returned an output id outside the int32 range"))
            return
        await self._sink.add(row)
        if self._on_row is not None:  # e.g. a worker keeping recent rows for spot-checks
            self._on_row(row)
        flags = tuple(row.flags)
        output_len = len(outcome.result.output_ids)
        self._progress.row_done(output_len, flags)
        self._emit(CaptureEvent("finished", job.sample_id, self._clock.wall(), rid=outcome.rid,
                                endpoint=endpoint, attempt=outcome.attempts, total=output_len,
                                flags=flags))

    def failed(self, job: Job, outcome: Outcome) -> None:
        """Record a row that failed for good (the next resume retries it)."""
        kind = outcome.error_kind or "unknown"
        reason = self._redact(outcome.reason or kind)
        endpoint = public_url(outcome.endpoint) if outcome.endpoint else None
        self._failures.write(Failure(job.sample_id, job.source, job.line, kind, reason,
                                     outcome.attempts, endpoint, outcome.rid,
                                     self._clock.wall()))
        self._progress.row_failed(kind)
        self._emit(CaptureEvent("failed", job.sample_id, self._clock.wall(), rid=outcome.rid,
                                endpoint=endpoint, attempt=outcome.attempts,
                                error_kind=kind, detail=reason))

    def rejected(self, reject: Reject) -> None:
        """Record a prompt refused before sending (one rejected row per preset)."""
        self._rejects.write(reject)
        self._progress.rejected += self._presets
        sample_id = reject.sample_id or f"{reject.source}:{reject.line}"
        self._emit(CaptureEvent("rejected", sample_id, self._clock.wall(),
                                error_kind="rejected", detail=reject.reason))

    def skipped(self, rows: int) -> None:
        """Count rows found done in earlier runs."""
        self._progress.already_done += rows

    def _emit(self, event: CaptureEvent) -> None:
        if self._events is not None:
            self._events(event)

"""A batch's state right now, derived from its record, its directory lock and its socket.

    starting      launched moments ago, not yet holding its directory
    running       the worker answers and dispatches
    paused        the worker answers; no new requests go out
    stopping      the worker answers and is draining
    unresponsive  the worker holds its directory but its socket does not answer
    done          the worker finished every row and exited
    stopped       stopped on request; ``resume`` continues it
    failed        the run failed (see ``reason``); ``resume`` retries it
    interrupted   the worker died (killed, crashed, machine rebooted); ``resume`` continues

The lock is the ground truth for "a worker is alive": the kernel drops it when the process
dies, however it dies, and it cannot be fooled by PID reuse.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec

from eagle_tui.core.batches.api import StatusDoc
from eagle_tui.core.batches.control_client import BatchClient
from eagle_tui.core.batches.registry import BatchRecord
from eagle_tui.core.batchstate import LIVE_STATES, RESUMABLE_STATES, BatchState
from eagle_tui.core.capture.progress import Progress
from eagle_tui.core.errors import BatchError, ConfigError
from eagle_tui.core.shards.batchdir.lock import is_held
from eagle_tui.core.shards.manifest import Manifest

__all__ = ["LIVE_STATES", "RESUMABLE_STATES", "BatchView", "offline_progress", "survey",
           "survey_all", "unanswered"]

STARTING_GRACE_S = 120.0  # a launch older than this that never took its lock has died


@dataclass(frozen=True)
class BatchView:
    """One batch as the user sees it: its state, its progress (None until any is known),
    and the live status when its worker answered.

    """

    record: BatchRecord
    state: BatchState
    progress: Progress | None
    live_status: StatusDoc | None = None
    detail: str | None = None

    @property
    def live(self) -> bool:
        """True while a worker runs for this batch."""
        return self.state in LIVE_STATES


async def survey(record: BatchRecord, *, timeout_s: float = 2.0) -> BatchView:
    """The state of one batch now (asks its worker when one holds the directory)."""
    if is_held(Path(record.out_dir)):
        return await _ask_worker(record, timeout_s)
    progress = offline_progress(record)
    if record.final_state is not None:
        return BatchView(record, record.final_state, progress, detail=record.reason)
    launched = record.launched_at or record.created_at
    if record.pid is None and time.time() - launched < STARTING_GRACE_S:
        return BatchView(record, BatchState.STARTING, progress)
    return BatchView(record, BatchState.INTERRUPTED, progress,
                     detail="the worker died without finishing; `eagle-tui resume` continues it")


async def survey_all(records: list[BatchRecord], *, timeout_s: float = 2.0) -> list[BatchView]:
    """``survey`` of every record, concurrently."""
    return list(await asyncio.gather(*(survey(r, timeout_s=timeout_s) for r in records)))


async def _ask_worker(record: BatchRecord, timeout_s: float) -> BatchView:
    try:
        async with BatchClient(record.socket, timeout_s=timeout_s) as client:
            status = await client.status()
    except BatchError as e:
        return unanswered(record, e)
    return BatchView(record, status.state, status.progress, live_status=status)


def unanswered(record: BatchRecord, error: BatchError) -> BatchView:
    """The view of a batch whose worker holds its directory but did not answer."""
    state = BatchState.STARTING if record.pid is None else BatchState.UNRESPONSIVE
    return BatchView(record, state, offline_progress(record), detail=str(error))


def offline_progress(record: BatchRecord) -> Progress | None:
    """Progress without a worker: the manifest's rows over the last progress the worker
    saved, without what only a running worker knows (in flight, retrying, rates, ETA)."""
    progress = record.last_progress
    try:
        manifest = Manifest.load_optional(record.out_dir)
    except ConfigError:
        manifest = None
    if manifest is not None:
        # The manifest counts the rows of every run; the saved progress of the last run
        # counts "done before" + "done now", which would count earlier runs twice.
        c = manifest.counts
        presets = len(manifest.extra.presets or [""])  # rejects count records, rows don't
        rejected = c.rejected * presets
        settled = c.done + c.failed + rejected
        base = progress or Progress()
        remaining = None if base.total is None else max(0, base.total - settled)
        progress = msgspec.structs.replace(base, written=c.done, done=c.done, already_done=0,
                                           flagged=c.flagged, failed=c.failed,
                                           rejected=rejected, settled=settled,
                                           remaining=remaining)
    if progress is None:
        return None
    return msgspec.structs.replace(progress, in_flight=0, retrying=0, samples_per_s=0.0,
                                   tokens_per_s=0.0, eta_s=None)

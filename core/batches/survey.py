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
from typing import Any

from eagle_tui.core.batches.control_client import BatchClient
from eagle_tui.core.batches.registry import BatchRecord
from eagle_tui.core.capture.outlock import is_held
from eagle_tui.core.errors import BatchError, ConfigError
from eagle_tui.core.shards.manifest import Manifest

LIVE_STATES = ("starting", "running", "paused", "stopping", "unresponsive")
RESUMABLE_STATES = ("stopped", "failed", "interrupted")
STARTING_GRACE_S = 120.0  # a launch older than this that never took its lock has died


@dataclass(frozen=True)
class BatchView:
    """One batch as the user sees it: state, counts, and the live status if it answered."""

    record: BatchRecord
    state: str
    counts: dict[str, Any]
    status: dict[str, Any] | None = None
    detail: str | None = None

    @property
    def live(self) -> bool:
        """True while a worker runs for this batch."""
        return self.state in LIVE_STATES


async def survey(record: BatchRecord, *, timeout_s: float = 2.0) -> BatchView:
    """The state of one batch now (asks its worker when one holds the directory)."""
    if is_held(Path(record.out_dir)):
        return await _ask_worker(record, timeout_s)
    counts = _offline_counts(record)
    if record.final_state is not None:
        return BatchView(record, record.final_state, counts, detail=record.reason)
    launched = record.launched_at or record.created_at
    if record.pid is None and time.time() - launched < STARTING_GRACE_S:
        return BatchView(record, "starting", counts)
    return BatchView(record, "interrupted", counts,
                     detail="the worker died without finishing; `eagle-tui resume` continues it")


async def survey_all(records: list[BatchRecord], *, timeout_s: float = 2.0) -> list[BatchView]:
    """``survey`` of every record, concurrently."""
    return list(await asyncio.gather(*(survey(r, timeout_s=timeout_s) for r in records)))


async def _ask_worker(record: BatchRecord, timeout_s: float) -> BatchView:
    try:
        async with BatchClient(record.socket, timeout_s=timeout_s) as client:
            status = await client.status()
    except BatchError as e:
        state = "starting" if record.pid is None else "unresponsive"
        return BatchView(record, state, _offline_counts(record), detail=str(e))
    counts = dict(status.get("progress", {}))
    return BatchView(record, str(status.get("state", "running")), counts, status=status)


def _offline_counts(record: BatchRecord) -> dict[str, Any]:
    """Counts without a worker: the manifest's rows, the last progress the worker saved."""
    counts = dict(record.last_progress)
    try:
        manifest = Manifest.load_optional(record.out_dir)
    except ConfigError:
        return counts
    if manifest is not None:
        # The manifest counts the rows of every run; the saved progress of the last run
        # counts "done before" + "done now", which would count earlier runs twice.
        c = manifest.counts
        presets = len(manifest.extra.get("presets") or [""])  # rejects count records
        counts.update(written=c.done, flagged=c.flagged, failed=c.failed,
                      rejected=c.rejected * presets, done=c.done, already_done=0)
        counts["settled"] = c.done + c.failed + c.rejected * presets
        total = counts.get("total")
        if isinstance(total, int):
            counts["remaining"] = max(0, total - counts["settled"])
    for live_only in ("in_flight", "retrying", "samples_per_s", "tokens_per_s", "eta_s"):
        counts.pop(live_only, None)
    return counts

"""``CaptureControl`` over detached batch workers: the dashboard's default.

The work is ``core.batches.monitor.BatchMonitor``'s (the registry polled, the workers'
control sockets, the ``/events`` followers, on a loop of its own; its docstring says why).
This half turns what it reads into the views' values: a ``BatchSnapshot`` per batch, a
``ShardRow`` per recent sample, and the flags and tokens of a finished batch counted from its
shards (parquet, which batch bookkeeping does not import). Batches outlive the dashboard
(``close`` stops nothing).

``start`` is blocking (``launch_detached`` waits for the worker to start dispatching): call
it from a worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from eagle_tui.core.batches.api import RecentSample, StatusDoc
from eagle_tui.core.batches.detach import launch_detached
from eagle_tui.core.batches.monitor import POLL_S, BatchMonitor, BatchReading, ShardCounters
from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.batchstate import RESUMABLE_STATES, BatchState
from eagle_tui.core.capture.progress import CaptureProgress, Progress
from eagle_tui.core.errors import ConfigError, EagleError
from eagle_tui.tui.render.batch import BatchSnapshot
from eagle_tui.tui.sources.capture import BatchRequest, validate_request

if TYPE_CHECKING:
    from eagle_tui.core.shards.schema import ShardRow

log = logging.getLogger(__name__)

Launcher = Callable[..., Any]


class DetachedCapture(BatchMonitor):
    """``CaptureControl`` over the registry's detached batches: a ``BatchMonitor`` whose
    readings and recent samples come out as the views' values."""

    def __init__(
        self,
        registry: Registry | None = None,
        *,
        poll_s: float = POLL_S,
        launcher: Launcher = launch_detached,
    ) -> None:
        shards = ShardCounters(shard_flag_counts, shard_output_tokens)
        super().__init__(registry, poll_s=poll_s, shards=shards)
        self._launcher = launcher
        self._made: tuple[tuple[BatchReading, ...], tuple[BatchSnapshot, ...]] = ((), ())
        """The last readings and their snapshots, swapped as one (any thread may ask)."""

    def batches(self) -> tuple[BatchSnapshot, ...]:
        """Every known batch, newest last (non-blocking)."""
        readings = self.readings()
        made, snapshots = self._made
        if readings is not made:  # a new poll: made once, read many times
            snapshots = tuple(snapshot_of(r) for r in readings)
            self._made = (readings, snapshots)
        return snapshots

    def start(self, request: BatchRequest) -> str:
        """Launch a detached worker for ``request`` (BLOCKING: up to its start-up)."""
        config = validate_request(request)
        try:
            launched = self._launcher(config, registry=self.registry, name=request.name or None)
        except EagleError as exc:
            raise ConfigError(str(exc)) from exc
        batch_id = str(launched.record.id)
        self.launched(batch_id)
        return batch_id

    def recent(self, batch_id: str) -> list[ShardRow]:
        """The worker's newest finished rows (BLOCKING, up to the survey's timeout)."""
        return [recent_row(sample) for sample in self.recent_samples(batch_id)]


# -- control API shapes and shards to the views' values ---------------------------------------


def shard_flag_counts(out_dir: Path) -> dict[str, int]:
    """Rows per flag in the shards of ``out_dir`` (empty when they cannot be read)."""
    from eagle_tui.tui.sources.samples import SampleSource  # pyarrow: only when asked

    try:
        source = SampleSource(out_dir)
        try:
            return dict(source.summary().flag_counts)
        finally:
            source.close()
    except Exception as exc:  # no shard yet, a damaged one: the total stays, kinds unknown
        log.info("flags of %s: %s", out_dir, exc)
        return {}


def shard_output_tokens(out_dir: Path) -> int | None:
    """Output tokens stored in the shards of ``out_dir`` (None when they cannot be read)."""
    from eagle_tui.core.shards.reader import ShardReader  # pyarrow: only when asked
    from eagle_tui.core.shards.tokens import stored_output_tokens

    try:
        reader = ShardReader(out_dir)
        try:
            return stored_output_tokens(reader)
        finally:
            reader.close()
    except Exception as exc:  # a damaged shard: the tokens stay unknown
        log.info("tokens of %s: %s", out_dir, exc)
        return None


def snapshot_of(reading: BatchReading) -> BatchSnapshot:
    """The Capture view's snapshot of one surveyed batch."""
    view = reading.view
    record = view.record
    config = record.config
    return BatchSnapshot(
        record.id,
        Path(record.out_dir),
        config.prompts,
        tuple(url.public for url in config.servers),
        view.state,
        tokenizer=config.tokenizer,
        progress=(progress_of(view.state, view.progress, view.live_status, reading.flags)
                  if view.progress is not None else None),
        error=reading.error or view.detail,
        name=record.name,
        resumable=view.state in RESUMABLE_STATES,
        stop_grace_s=config.stop_grace_s,
        stored_tokens=reading.stored_tokens,
    )


def progress_of(
    state: BatchState, progress: Progress, status: StatusDoc | None = None,
    flags: dict[str, int] | None = None,
) -> CaptureProgress:
    """A ``CaptureProgress`` from a worker's progress (and its ``/status`` tables, or the
    flags by kind counted in the shards)."""
    if status is None:
        return CaptureProgress(state=state, counts=progress, flags=flags or {})
    return CaptureProgress(state=state, counts=progress, servers=status.servers,
                           errors=status.errors, failures=status.failures, flags=status.flags)


def recent_row(sample: RecentSample) -> ShardRow:
    """A row of ``GET /recent`` as the shards would hold it (its acceptance in the shard
    column's form)."""
    from eagle_tui.core.shards.schema import ShardRow  # pyarrow: only when asked

    acceptance = (None if isinstance(sample.acceptance, msgspec.UnsetType)
                  else msgspec.to_builtins(sample.acceptance))
    return ShardRow(sample.sample_id, sample.input_ids, sample.prompt_len,
                    sample.finish_reason, sample.matched_stop, sample.think_end, sample.flags,
                    sample.endpoint, sample.rid, sample.latency_s,
                    datetime.fromtimestamp(sample.created_at, UTC), acceptance=acceptance)

"""The capture engine: prompts in, validated exact-token rows out, as a library.

``CaptureEngine(config).run()`` runs one batch to its end and returns a
``CaptureSummary``. While it runs, from the same event loop:

- ``progress()`` returns an immutable ``CaptureProgress`` snapshot (never blocks);
- ``pause()`` / ``resume()`` hold and release new requests (in-flight ones finish);
- ``stop(grace_s, abort=False)`` stops dispatching, lets in-flight requests finish for up
  to ``grace_s``, then aborts the rest on the servers; ``abort=True`` (or a second call
  with it) skips the grace period. Either way everything finished is flushed into complete
  shards and the manifest is updated;
- ``watch(n)`` streams the next ``n`` requests and reports their token deltas to the
  event sink.

The parts: ``batch`` (open prompts, tokenizer and output dir), ``render`` (prompt ids in a
thread, bounded queue), ``sender`` + ``dispatch`` + ``healthloop`` (requests, retries,
server pool), ``rows`` + ``sink`` (validated rows to shards in a thread), ``progress``,
``failures``. A fixed set of worker tasks (the total concurrency) pulls jobs from the
queue, so memory does not grow with the number of prompts.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.capture.batch import PreparedBatch, prepare_batch
from eagle_tui.core.capture.config import CaptureConfig, Redactor
from eagle_tui.core.capture.control import RunControl
from eagle_tui.core.capture.dispatch import ServerPool
from eagle_tui.core.capture.drain import Drainer
from eagle_tui.core.capture.events import EventSink
from eagle_tui.core.capture.failures import FailureLog
from eagle_tui.core.capture.healthloop import HealthMonitor
from eagle_tui.core.capture.progress import CaptureProgress, ProgressTracker
from eagle_tui.core.capture.prompts import RejectLog
from eagle_tui.core.capture.render import Job, Renderer, RenderPipeline
from eagle_tui.core.capture.rids import RidAllocator
from eagle_tui.core.capture.routed import (
    check_sampling,
    requested_sampling,
    router_notes,
    router_records,
)
from eagle_tui.core.capture.rows import RowBuilder
from eagle_tui.core.capture.scheduler_env import SchedulerSlice
from eagle_tui.core.capture.sender import Sender, sampling_params
from eagle_tui.core.capture.servers import ClientFactory, open_pool, shard_metadata
from eagle_tui.core.capture.settle import Settler, draft_tokens_of
from eagle_tui.core.capture.sink import ShardSink
from eagle_tui.core.capture.turns import (
    ConversationFeed,
    ConversationJob,
    TurnDriver,
    TurnSettings,
    count_turns,
    open_stored_rows,
)
from eagle_tui.core.clock import Clock, SystemClock
from eagle_tui.core.errors import OutputWriteError
from eagle_tui.core.fsio import describe_os_error
from eagle_tui.core.shards.batchdir.layout import BatchDir
from eagle_tui.core.shards.manifest import RouterRecord, ShardInfo
from eagle_tui.core.shards.schema import ShardRow
from eagle_tui.core.shards.writer import ShardWriter
from eagle_tui.core.tokenizer import LoadedTokenizer
from eagle_tui.core.tokenizer.kimi_parse import AnswerTokens

log = logging.getLogger(__name__)

WATCHDOG_TICK_S = 1.0
WATCHDOG_MIN_TICK_S = 0.01



@dataclass(frozen=True)
class CaptureSummary:
    """How a batch run ended. ``state``: ``finished``, ``stopped`` or ``failed``."""

    state: BatchState
    reason: str | None
    progress: CaptureProgress
    out_dir: Path
    prompts_without_think: int
    notes: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        """0 clean; 1 some rows failed or prompts were rejected; 3 the run itself failed."""
        if self.state == BatchState.FAILED:
            return 3
        if self.progress.counts.failed or self.progress.counts.rejected:
            return 1
        return 0


@dataclass(frozen=True)
class _Parts:
    """What one run is made of, assembled once the batch is prepared."""

    batch: PreparedBatch
    pool: ServerPool
    writer: ShardWriter
    sink: ShardSink
    sender: Sender
    settler: Settler
    feeder: RenderPipeline | ConversationFeed
    renderer: Renderer
    failures: FailureLog
    rejects: RejectLog
    turns: TurnDriver | None = None


class CaptureEngine:
    """Runs one capture batch; see the module docstring for the control surface."""

    def __init__(
        self,
        config: CaptureConfig,
        *,
        clock: Clock | None = None,
        event_sink: EventSink | None = None,
        tokenizer: LoadedTokenizer | None = None,
        client_factory: ClientFactory | None = None,
        rng: random.Random | None = None,
        on_row: Callable[[ShardRow], None] | None = None,
        scheduler: SchedulerSlice | None = None,
    ) -> None:
        if scheduler is not None and scheduler.partition != config.partition:
            raise ValueError(f"the scheduler's slice {scheduler.partition} is not the "
                             f"config's {config.partition}")
        self.config = config
        self._scheduler = scheduler
        self._clock: Clock = clock or SystemClock()
        self._events = event_sink
        self._on_row = on_row
        self._tokenizer = tokenizer
        self._client_factory = client_factory
        self._rng = rng or random.Random()
        self._redact = Redactor(config)
        self._rids = RidAllocator()
        self.control = RunControl()
        self.tracker = ProgressTracker(self._clock)
        self._pool: ServerPool | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._feeder: asyncio.Task[None] | None = None
        self._queue: asyncio.Queue[Job | ConversationJob | None] | None = None
        self._stopper: asyncio.Task[None] | None = None
        self._abort = asyncio.Event()
        self._fatal: str | None = None
        self._grace_s = config.stop_grace_s
        self._started = False
        self._finished = False
        self._notes: list[str] = []
        self._routers: list[RouterRecord] = []

    # -- control surface ------------------------------------------------------------------

    def progress(self) -> CaptureProgress:
        """An immutable snapshot of the batch now."""
        pool = self._pool
        if pool is None:
            return self.tracker.snapshot()
        return self.tracker.snapshot(in_flight=pool.in_flight, servers=pool.statuses())

    def pause(self) -> None:
        """Send no new requests until ``resume`` (in-flight requests finish)."""
        self.control.pause()
        if self.tracker.state == BatchState.RUNNING:
            self.tracker.state = BatchState.PAUSED

    def resume(self) -> None:
        """Undo ``pause``."""
        self.control.resume()
        if self.tracker.state == BatchState.PAUSED:
            self.tracker.state = BatchState.RUNNING

    def watch(self, count: int) -> None:
        """Stream the next ``count`` requests and report their token deltas as events."""
        self.control.watch(count)

    def stop(self, grace_s: float | None = None, *, abort: bool = False) -> None:
        """Stop the batch: drain in-flight requests for ``grace_s`` (default from the config),
        then abort the rest. ``abort=True`` aborts at once, also when a stop is under way."""
        if abort:
            self._abort.set()
        if grace_s is not None:
            self._grace_s = grace_s
        self.control.request_stop()
        if self._workers and self._stopper is None and not self._finished:
            self._stopper = asyncio.ensure_future(self._drain(self._grace_s))

    # -- the run --------------------------------------------------------------------------

    async def run(self) -> CaptureSummary:
        """Run the batch to its end (or to a stop); raises ConfigError/TokenizerError before
        sending anything when the batch cannot start."""
        if self._started:
            raise RuntimeError("a CaptureEngine runs once; make a new one to resume")
        self._started = True
        async with AsyncExitStack() as stack:
            pool = await stack.enter_async_context(
                open_pool(self.config, self._clock, self._client_factory))
            # Refused before the batch directory is made: a router would drop these keys.
            self._notes += check_sampling(pool, requested_sampling(self.config),
                                          force=self.config.force)
            batch = await self._prepare()
            self._pool = pool
            parts = await self._assemble(batch, pool, stack)
            await self._execute(parts)
            await self._finish_manifest(parts)
        return self._summary(parts)

    async def _prepare(self) -> PreparedBatch:
        """The batch directory, resume scan and prompt source (OutputWriteError when the
        directory cannot be written: nothing has been sent yet)."""
        try:
            batch = await asyncio.to_thread(prepare_batch, self.config, self._tokenizer,
                                            scheduler=self._scheduler)
        except OSError as e:  # the output directory cannot be written (disk full, ...)
            raise OutputWriteError(
                f"cannot prepare {self.config.out_dir}: {describe_os_error(e)}"
                + (f" writing {e.filename}" if e.filename else "")
                + "; nothing was sent. Free space (or fix the error) and run the same "
                "command again", path=self.config.out_dir) from e
        for note in batch.notes:
            log.warning("%s", note)
        if self._scheduler is not None:
            log.info("%s (%s)", self._scheduler.describe(),
                     "resumed" if batch.resumed else "a fresh batch")
        return batch

    async def _assemble(
        self, batch: PreparedBatch, pool: ServerPool, stack: AsyncExitStack
    ) -> _Parts:
        """Build the run's parts; files opened here are closed by ``stack``."""
        config = self.config
        self._routers = await router_records(pool)
        metadata = await shard_metadata(config, batch, pool, self._routers)
        failures = FailureLog(config.out_dir, carry=batch.resumed and not config.retry_failed)
        stack.callback(failures.close)
        rejects = stack.enter_context(RejectLog(BatchDir(config.out_dir).rejects))
        writer = ShardWriter(config.out_dir, metadata=metadata, manifest=batch.manifest,
                             max_rows=config.shard_rows)
        sink = ShardSink(writer, self._clock, max_age_s=config.shard_max_age_s,
                         counts=lambda: (failures.count, rejects.count),
                         on_commit=self._committed, on_fatal=lambda e: self._fail(str(e)))
        settler = Settler(rows=RowBuilder(batch.boundaries, batch.vocab_size,
                                          config.max_new_tokens), sink=sink,
                          failures=failures, rejects=rejects, progress=self.tracker,
                          clock=self._clock, presets=len(config.presets),
                          redact=self._redact.clean, events=self._events,
                          on_fatal=self._fail, on_row=self._on_row,
                          draft_tokens=await draft_tokens_of(pool))
        renderer = Renderer(batch.tokenizer, vocab_size=batch.vocab_size,
                            think_id=batch.boundaries.think,
                            template_kwargs=config.template_kwargs)
        sender = self._sender(batch, pool)
        if config.multi_turn:
            turns = self._turn_driver(batch, renderer, sender, settler, failures)
            stack.callback(turns.close)
            conversations = ConversationFeed(batch.source, config.presets,
                                             on_reject=settler.rejected,
                                             chunk=config.render_chunk)
            return _Parts(batch, pool, writer, sink, sender, settler, conversations, renderer,
                          failures, rejects, turns)
        feeder = RenderPipeline(
            batch.source, renderer, config.presets,
            pending_presets=lambda sid: tuple(
                p for p in config.presets if p.sample_id(sid) not in batch.done_ids),
            on_reject=settler.rejected, on_skip=settler.skipped,
            still_failed=failures.carried.__contains__, on_still_failed=settler.still_failed,
            chunk=config.render_chunk)
        return _Parts(batch, pool, writer, sink, sender, settler, feeder, renderer, failures,
                      rejects)

    def _turn_driver(self, batch: PreparedBatch, renderer: Renderer, sender: Sender,
                     settler: Settler, failures: FailureLog) -> TurnDriver:
        """The multi-turn driver (``--turns all``): conversations turn by turn."""
        tokens = AnswerTokens.resolve(batch.tokenizer.token_id, batch.boundaries.stop)
        settings = TurnSettings.of(self.config, done_ids=batch.done_ids,
                                   still_failed=failures.carried.__contains__,
                                   think_id=batch.boundaries.think, tokens=tokens)
        return TurnDriver(settings, renderer=renderer, decoder=batch.tokenizer, sender=sender,
                          settler=settler, control=self.control, progress=self.tracker,
                          stored=lambda: open_stored_rows(self.config.out_dir))

    def _sender(self, batch: PreparedBatch, pool: ServerPool) -> Sender:
        config = self.config
        sampling = {
            p.name: sampling_params(p, max_new_tokens=config.max_new_tokens,
                                    stop_token_ids=batch.boundaries.stop,
                                    extra=config.extra_sampling)
            for p in config.presets
        }
        return Sender(pool, sampling=sampling, retry=config.retry,
                      timeout_s=config.request_timeout_s, control=self.control,
                      progress=self.tracker, clock=self._clock, rng=self._rng,
                      rids=self._rids, sink=self._events, on_fatal=self._fail,
                      redact=self._redact.clean)

    async def _execute(self, parts: _Parts) -> None:
        """Workers, feeder, writer and watchers, until every worker has ended."""
        config = self.config
        capacity = sum(s.limit for s in parts.pool.servers)  # a router takes one per worker
        self._queue = asyncio.Queue(maxsize=2 * capacity)
        self.tracker.state = BatchState.PAUSED if self.control.paused else BatchState.RUNNING
        monitor = HealthMonitor(parts.pool, self._clock, interval_s=config.health_interval_s,
                                paused_interval_s=config.health_retry_s)
        async with asyncio.TaskGroup() as group:
            writing = group.create_task(parts.sink.run())
            watchers = [group.create_task(monitor.run()),
                        group.create_task(self._watch_servers(parts.pool)),
                        group.create_task(self._count_total(parts.batch))]
            self._feeder = group.create_task(parts.feeder.run(self._queue))
            self._workers = [group.create_task(self._work(parts))
                             for _ in range(capacity)]
            if self.control.stopping:  # stop() came while the batch was being prepared
                self.stop()
            await asyncio.gather(*self._workers, return_exceptions=True)
            self._finished = True
            if self._stopper is not None:
                await self._stopper
            self._stop_feeding()
            await parts.sink.close()
            await writing
            for task in watchers:
                task.cancel()
            await parts.sender.drain_background()

    async def _work(self, parts: _Parts) -> None:
        """One worker: take a job, send it until it ends, settle it; repeat."""
        queue = self._queue
        assert queue is not None
        while not self.control.stopping:
            job = await queue.get()
            if job is None:
                queue.put_nowait(None)  # pass the end marker on to the next worker
                return
            if isinstance(job, ConversationJob):
                assert parts.turns is not None
                await parts.turns.drive(job)
                continue
            outcome = await parts.sender.send(job)
            await parts.settler.settle(job, outcome)

    def _committed(self, info: ShardInfo) -> None:
        self.tracker.written += info.rows

    # -- background duties ----------------------------------------------------------------

    async def _count_total(self, batch: PreparedBatch) -> None:
        count = (lambda: count_turns(batch.source)) if self.config.multi_turn else (
            batch.source.count)
        try:
            records = await asyncio.to_thread(count)
        except (OSError, ValueError) as e:  # only the ETA suffers
            log.warning("could not count the prompts (no ETA): %s", e)
            return
        self.tracker.total = records * len(self.config.presets)

    async def _watch_servers(self, pool: ServerPool) -> None:
        """Fail the run when no server has been usable for ``server_down_limit_s``."""
        limit = self.config.server_down_limit_s
        # A short limit is not overrun by a whole tick; the floor keeps a zero from spinning.
        tick = max(WATCHDOG_MIN_TICK_S, min(WATCHDOG_TICK_S, limit / 4))
        while True:
            await self._clock.sleep(tick)
            if pool.down_for() >= limit:
                reasons = "; ".join(f"{s.url}: {s.reason}" for s in pool.statuses())
                self._fail(f"no server has been healthy for {limit:g} s ({reasons}); "
                           "start or fix a server and resume the batch")
                return

    def _fail(self, reason: str) -> None:
        """End the run as failed: stop at once, keeping what is complete."""
        if self._fatal is None:
            self._fatal = self._redact.clean(reason)
            log.error("capture stopping: %s", self._fatal)
        self.stop(abort=True)

    # -- stopping -------------------------------------------------------------------------

    def _stop_feeding(self) -> None:
        """No more jobs: stop rendering, drop queued jobs (resume redoes them), end marker."""
        if self._feeder is not None:
            self._feeder.cancel()
        queue = self._queue
        if queue is None:
            return
        while not queue.empty():
            queue.get_nowait()
        queue.put_nowait(None)

    async def _drain(self, grace_s: float) -> None:
        self.tracker.state = BatchState.STOPPING
        assert self._pool is not None
        drainer = Drainer(workers=self._workers, pool=self._pool,
                          run_prefix=self._rids.run_prefix, clock=self._clock,
                          abort=self._abort, stop_feeding=self._stop_feeding,
                          redact=self._redact.clean)
        await drainer.drain(grace_s)

    # -- the end --------------------------------------------------------------------------

    async def _finish_manifest(self, parts: _Parts) -> None:
        """Final counts and state into the manifest (the writer thread is idle now)."""
        manifest = parts.writer.manifest
        manifest.counts.failed = parts.failures.count
        manifest.counts.rejected = parts.rejects.count
        manifest.extra.state = self._final_state()
        manifest.extra.servers = [u.public for u in self.config.servers]
        manifest.extra.presets = [p.name for p in self.config.presets]
        manifest.extra.routers = self._routers
        manifest.extra.turns_not_generated = dict(self.tracker.ended_reasons)
        try:
            await asyncio.to_thread(manifest.save_atomic)
        except OSError as e:  # the shards are safe; only the final counts are stale
            self._fail(f"could not write the final {manifest.path}: {describe_os_error(e)}; "
                       "every listed shard is safe. Free space and resume the batch")

    def _final_state(self) -> BatchState:
        if self._fatal is not None:
            return BatchState.FAILED
        if self.control.stopping and not self._every_row_settled():
            return BatchState.STOPPED
        return BatchState.FINISHED

    def _every_row_settled(self) -> bool:
        """Every row of the batch has its outcome: a stop that came during the last rows,
        which then finished while draining, left nothing for a resume to do."""
        counts = self.tracker.snapshot().counts
        return counts.remaining == 0 and counts.interrupted == 0

    def _summary(self, parts: _Parts) -> CaptureSummary:
        self.tracker.state = self._final_state()
        return CaptureSummary(
            state=self.tracker.state,
            reason=self._fatal,
            progress=self.progress(),
            out_dir=self.config.out_dir,
            prompts_without_think=parts.renderer.without_think,
            notes=(*parts.batch.notes, *self._notes,
                   *(router_notes(self._pool) if self._pool is not None else ())),
        )


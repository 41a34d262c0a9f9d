"""``CaptureControl`` over detached batch workers (``core.batches``): the dashboard's default.

Every batch in the registry is listed, so a fresh dashboard finds the batches started
earlier, by another dashboard or by ``eagle-tui capture --detach``; they outlive the
dashboard (``close`` stops nothing). All I/O runs on one private thread with its own event
loop, never on the UI loop:

* a poller reads the registry and surveys every batch (``core.batches.survey``) every
  ``POLL_S`` and publishes immutable ``BatchSnapshot``s that ``batches()`` returns;
* actions (pause, resume, stop, watch, resume an interrupted run) are queued to that loop
  and talk to the worker's control socket with ``BatchClient``; a failure is kept as the
  batch's ``error`` (shown in the Capture view), never raised into the UI;
* a watched batch gets one ``/events`` follower that keeps the ``delta`` and ``request``
  events of watched requests (the engine's own ``CaptureEvent`` structs) in a bounded
  buffer, which the Streams view drains a few times a second (``take_events``), so UI
  updates are batched, never per token.

``start`` is blocking (``launch_detached`` waits for the worker to start dispatching): call
it from a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from eagle_tui.core.batches.api import (
    Disconnected,
    Lost,
    RecentSample,
    RecentSamples,
    StatusDoc,
)
from eagle_tui.core.batches.control_client import BatchClient
from eagle_tui.core.batches.detach import launch_detached, relaunch
from eagle_tui.core.batches.events import END, HELLO
from eagle_tui.core.batches.registry import BatchRecord, Registry
from eagle_tui.core.batches.survey import BatchView, survey_all, unanswered
from eagle_tui.core.batchstate import FINAL_STATES, RESUMABLE_STATES, BatchState
from eagle_tui.core.capture.events import CaptureEvent, DeltaEvent, RequestEvent
from eagle_tui.core.capture.progress import CaptureProgress, Progress
from eagle_tui.core.errors import BatchError, ConfigError, EagleError
from eagle_tui.core.shards.batchdir.lock import is_held
from eagle_tui.tui.render.batch import BatchSnapshot
from eagle_tui.tui.sources.capture import BatchRequest, validate_request

if TYPE_CHECKING:
    from eagle_tui.core.shards.schema import ShardRow

log = logging.getLogger(__name__)

POLL_S = 0.5
SURVEY_TIMEOUT_S = 2.0
EVENT_BUFFER = 50_000
HELLO_WAIT_S = 45.0
"""How long a watch waits for its event subscription before asking the worker to stream.
Streaming before we are subscribed loses the first ids of the requests it starts, so the
wait is as long as the event stream's own read timeout: a loaded machine took over 3 s."""
CLOSE_WAIT_S = 0.5
"""How long closing waits for the follower thread (a daemon: it never holds the exit up)."""
_ENDED_KINDS = frozenset({"finished", "failed", "rejected"})

Launcher = Callable[..., Any]


class DetachedCapture:
    """``CaptureControl`` over the registry of detached batches and their control sockets."""

    def __init__(
        self,
        registry: Registry | None = None,
        *,
        poll_s: float = POLL_S,
        launcher: Launcher = launch_detached,
    ) -> None:
        self._registry = registry
        self._poll_s = poll_s
        self._launcher = launcher
        self._snapshots: tuple[BatchSnapshot, ...] = ()
        self._records: dict[str, BatchRecord] = {}
        self._cache: dict[str, BatchView] = {}
        self._errors: dict[str, str] = {}
        self._shard_flags: dict[tuple[str, int], dict[str, int]] = {}
        self._shard_tokens: dict[tuple[str, int], int | None] = {}
        """Flag counts by kind read from the shards of a batch no worker runs, by (id, rows
        done): only a running worker counts them by kind."""
        self._events: dict[str, deque[CaptureEvent]] = {}
        self._watched: dict[str, set[str]] = {}
        """Per batch, the samples being streamed: kept when a follower is started again, so
        the end of a request that began under the old one still reaches the Streams view."""
        self._followers: dict[str, asyncio.Task[None]] = {}
        self._hello: dict[str, asyncio.Event] = {}
        self._clients: dict[str, BatchClient] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._wake: asyncio.Event | None = None
        self._ready = threading.Event()
        self._closed = False

    @property
    def registry(self) -> Registry:
        """The registry read (the state dir's, unless one was given)."""
        if self._registry is None:
            self._registry = Registry()
        return self._registry

    # -- CaptureControl ----------------------------------------------------------------------

    def batches(self) -> tuple[BatchSnapshot, ...]:
        self._ensure_thread()
        return self._snapshots

    def start(self, request: BatchRequest) -> str:
        """Launch a detached worker for ``request`` (BLOCKING: up to its start-up)."""
        config = validate_request(request)
        try:
            launched = self._launcher(config, registry=self.registry, name=request.name or None)
        except EagleError as exc:
            raise ConfigError(str(exc)) from exc
        batch_id = str(launched.record.id)
        self._errors.pop(batch_id, None)
        self._poke()
        return batch_id

    def pause(self, batch_id: str) -> None:
        self._submit(batch_id, lambda c: c.pause())

    def resume(self, batch_id: str) -> None:
        """Resume a paused batch; start a new worker for a stopped, failed or interrupted one."""
        snapshot = self._find(batch_id)
        if snapshot is not None and snapshot.resumable:
            self._schedule(batch_id, self._relaunch(batch_id))
        else:
            self._submit(batch_id, lambda c: c.resume())

    def stop(self, batch_id: str, *, abort: bool) -> None:
        self._submit(batch_id, lambda c: c.stop(abort=abort))

    def watch(self, batch_id: str, count: int) -> None:
        self._schedule(batch_id, self._watch(batch_id, count))

    def take_events(self, batch_id: str, limit: int = 10_000) -> list[CaptureEvent]:
        events = self._events.get(batch_id)
        if events is None:
            return []
        taken: list[CaptureEvent] = []
        with contextlib.suppress(IndexError):
            while len(taken) < limit:
                taken.append(events.popleft())
        return taken

    def following(self, batch_id: str) -> bool:
        task = self._followers.get(batch_id)
        return (task is not None and not task.done()) or bool(self._events.get(batch_id))

    def recent(self, batch_id: str) -> list[ShardRow]:
        """The worker's newest finished rows (BLOCKING, up to ``SURVEY_TIMEOUT_S``)."""
        self._ensure_thread()
        loop = self._loop
        if loop is None:
            return []

        async def ask() -> RecentSamples:
            return await self._client(batch_id).recent()

        try:
            reply = asyncio.run_coroutine_threadsafe(ask(), loop).result(SURVEY_TIMEOUT_S + 1)
        except Exception as exc:  # an old worker (404), one that ended, a timeout
            log.info("recent rows of %s: %s", batch_id, exc)
            return []
        return [recent_row(sample) for sample in reply.samples]

    def close(self) -> None:
        """Stop following (the batches keep running: they are detached). Idempotent."""
        self._closed = True
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(self._shutdown)
            thread.join(timeout=CLOSE_WAIT_S)

    # -- beyond the interface ----------------------------------------------------------------

    def abort_and_wait(self, batch_id: str, timeout_s: float = 20.0) -> bool:
        """Abort ``batch_id``'s worker and wait until it exits (SIGKILL after ``timeout_s``);
        True when no worker holds its directory any more. Blocking."""
        try:
            record = self.registry.load(batch_id)
        except BatchError:
            return True
        out_dir = Path(record.out_dir)
        if not is_held(out_dir):
            return True

        async def abort() -> None:
            async with BatchClient(record.socket) as client:
                await client.stop(abort=True)

        try:
            asyncio.run(abort())
        except (BatchError, OSError) as exc:
            log.warning("aborting batch %s: %s", batch_id, exc)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not is_held(out_dir):
                return True
            time.sleep(0.1)
        pid = self.registry.load(batch_id).pid
        if pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and is_held(out_dir):
            time.sleep(0.1)
        return not is_held(out_dir)

    # -- the private loop --------------------------------------------------------------------

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(target=self._run, name="capture-batches", daemon=True)
            self._thread.start()
        self._ready.wait(5.0)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception:  # the thread must never take the app down
            log.exception("the batch follower stopped")

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._ready.set()
        while not self._closed:
            try:
                await self._poll()
            except Exception:  # keep polling; show what we can
                log.exception("surveying batches failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._poll_s)
            self._wake.clear()
        for task in list(self._followers.values()):
            task.cancel()
        for client in list(self._clients.values()):
            with contextlib.suppress(Exception):
                await client.aclose()

    def _shutdown(self) -> None:
        self._closed = True
        if self._wake is not None:
            self._wake.set()

    def _poke(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wake.set)

    async def _poll(self) -> None:
        records = self.registry.all()  # a few small files, on this private thread
        self._records = {r.id: r for r in records}
        fresh = [r for r in records if not self._settled(r)]
        views = await asyncio.gather(*(self._survey(r) for r in fresh))
        for view in views:
            self._cache[view.record.id] = view
            if not view.live:  # an action's error is stale once no worker runs
                self._errors.pop(view.record.id, None)
        flags = [await self._flags_in_shards(self._cache[r.id]) for r in records]
        tokens = [await self._tokens_in_shards(self._cache[r.id]) for r in records]
        self._snapshots = tuple(
            snapshot_of(self._cache[r.id], self._errors.get(r.id), kinds, stored)
            for r, kinds, stored in zip(records, flags, tokens, strict=True)
        )

    async def _flags_in_shards(self, view: BatchView) -> dict[str, int] | None:
        """Flags by kind of a batch no worker runs, counted once from its shards."""
        progress = view.progress
        if view.live or progress is None or not progress.flagged:
            return None
        key = (view.record.id, progress.done)
        if key not in self._shard_flags:
            self._shard_flags[key] = await asyncio.to_thread(
                shard_flag_counts, Path(view.record.out_dir))
        return self._shard_flags[key] or None

    async def _tokens_in_shards(self, view: BatchView) -> int | None:
        """Output tokens of a batch no worker runs, counted once from its shards (a worker
        counts only its own run's)."""
        progress = view.progress
        if view.live or progress is None or not progress.done:
            return None
        key = (view.record.id, progress.done)
        if key not in self._shard_tokens:
            self._shard_tokens[key] = await asyncio.to_thread(
                shard_output_tokens, Path(view.record.out_dir))
        return self._shard_tokens[key]

    async def _survey(self, record: BatchRecord) -> BatchView:
        """``survey`` of one batch, asking a live worker over a kept connection (a new httpx
        client per poll costs an SSL context: tens of ms holding the GIL)."""
        if not is_held(Path(record.out_dir)):
            return (await survey_all([record], timeout_s=SURVEY_TIMEOUT_S))[0]
        try:
            status = await self._client(record.id).status()
        except BatchError as exc:
            return unanswered(record, exc)
        return BatchView(record, status.state, status.progress, live_status=status)

    def _client(self, batch_id: str) -> BatchClient:
        """The kept control client of ``batch_id`` (remade when its socket moves)."""
        socket = self._socket(batch_id)
        client = self._clients.get(batch_id)
        if client is None or str(client.socket_path) != socket:
            client = BatchClient(socket, timeout_s=SURVEY_TIMEOUT_S)
            self._clients[batch_id] = client
        return client

    def _settled(self, record: BatchRecord) -> bool:
        """True when the cached view of ``record`` is final and its record unchanged."""
        cached = self._cache.get(record.id)
        return (
            cached is not None
            and cached.record == record
            and cached.state in FINAL_STATES
            and record.final_state is not None
        )

    def _find(self, batch_id: str) -> BatchSnapshot | None:
        return next((s for s in self._snapshots if s.batch_id == batch_id), None)

    # -- actions -----------------------------------------------------------------------------

    def _schedule(self, batch_id: str, action: Coroutine[Any, Any, None]) -> None:
        self._ensure_thread()
        loop = self._loop
        if loop is None:
            action.close()
            self._errors[batch_id] = "the batch follower is not running"
            return
        guarded = self._guarded(batch_id, action)
        try:  # _guarded keeps its own errors: the future is not needed
            asyncio.run_coroutine_threadsafe(guarded, loop)
        except RuntimeError:  # the loop ended (closed)
            guarded.close()
            action.close()

    async def _guarded(self, batch_id: str, action: Coroutine[Any, Any, None]) -> None:
        try:
            await action
            self._errors.pop(batch_id, None)
        except Exception as exc:  # shown on the batch, never raised into the UI
            log.warning("batch %s: %s", batch_id, exc)
            self._errors[batch_id] = str(exc)
        if self._wake is not None:
            self._wake.set()

    def _submit(
        self, batch_id: str, call: Callable[[BatchClient], Coroutine[Any, Any, Any]]
    ) -> None:
        async def act() -> None:
            await call(self._client(batch_id))

        self._schedule(batch_id, act())

    def _socket(self, batch_id: str) -> str:
        record = self._records.get(batch_id) or self.registry.load(batch_id)
        return record.socket

    async def _relaunch(self, batch_id: str) -> None:
        record = await asyncio.to_thread(self.registry.load, batch_id)
        await asyncio.to_thread(relaunch, record, self.registry)

    async def _watch(self, batch_id: str, count: int) -> None:
        hello = self._follow(batch_id)
        with contextlib.suppress(TimeoutError):  # subscribe first: no delta is missed
            # (the hello also comes when the follower fails: no hang here)
            await asyncio.wait_for(hello.wait(), HELLO_WAIT_S)
        await self._client(batch_id).watch(count)

    def _follow(self, batch_id: str) -> asyncio.Event:
        """Start the ``/events`` follower of ``batch_id`` unless it runs; its hello event."""
        task = self._followers.get(batch_id)
        if task is None or task.done():
            self._hello[batch_id] = asyncio.Event()
            self._events.setdefault(batch_id, deque(maxlen=EVENT_BUFFER))
            self._followers[batch_id] = asyncio.create_task(self._follow_events(batch_id))
        return self._hello[batch_id]

    async def _follow_events(self, batch_id: str) -> None:
        buffer = self._events[batch_id]
        hello = self._hello[batch_id]
        watched = self._watched.setdefault(batch_id, set())
        try:
            async with BatchClient(self._socket(batch_id)) as client:
                async for event in client.events():
                    data = event.data
                    if event.type == HELLO:
                        hello.set()
                    elif isinstance(data, DeltaEvent):
                        buffer.append(delta_event(data, watched))
                    elif isinstance(data, RequestEvent):
                        converted = request_event(data, watched)
                        if converted is not None:
                            buffer.append(converted)
                    elif isinstance(data, Lost):
                        self._errors[batch_id] = (
                            f"{data.dropped} stream events dropped (slow reader)"
                        )
                        log.info("events of batch %s: %s", batch_id, self._errors[batch_id])
                    elif isinstance(data, Disconnected):  # events until it is back are lost
                        log.info("events of batch %s: %s", batch_id, data.reason)
                    elif event.type == END:
                        break
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the batch ended or died: the poller shows its state
            log.info("events of batch %s: %s", batch_id, exc)
        finally:
            log.info("events of batch %s: no longer followed", batch_id)
            hello.set()


# -- control API shapes to snapshots and events -------------------------------------------


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


def snapshot_of(view: BatchView, error: str | None = None,
                flags: dict[str, int] | None = None,
                stored_tokens: int | None = None) -> BatchSnapshot:
    """The Capture view's snapshot of one surveyed batch (``flags``: by kind, and
    ``stored_tokens``, from the shards, when no worker counts them)."""
    record = view.record
    config = record.config
    return BatchSnapshot(
        record.id,
        Path(record.out_dir),
        config.prompts,
        tuple(url.public for url in config.servers),
        view.state,
        tokenizer=config.tokenizer,
        progress=(progress_of(view.state, view.progress, view.live_status, flags)
                  if view.progress is not None else None),
        error=error or view.detail,
        name=record.name,
        resumable=view.state in RESUMABLE_STATES,
        stop_grace_s=config.stop_grace_s,
        stored_tokens=stored_tokens,
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


def delta_event(data: DeltaEvent, watched: set[str]) -> DeltaEvent:
    """A ``delta`` SSE event, its sample counted as watched: only watched requests stream,
    and the ``sent`` event that said so may have been dropped for a slow reader or missed
    while the follower reconnected."""
    watched.add(data.sample_id)
    return data


def request_event(data: RequestEvent, watched: set[str]) -> RequestEvent | None:
    """A ``request`` SSE event, marked watched, if it belongs to a watched request
    (``watched`` tracks the sample ids being streamed)."""
    sample_id = data.sample_id
    if data.watched:
        watched.add(sample_id)
    if sample_id not in watched:
        return None
    if data.kind in _ENDED_KINDS:
        watched.discard(sample_id)
    return msgspec.structs.replace(data, watched=True)


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

"""``BatchMonitor``: every detached batch followed from one process, on a loop of its own.

Every batch in the registry is listed, so a fresh monitor finds the batches started
earlier, by another dashboard or by ``eagle-tui capture --detach``; they outlive the
monitor (``close`` stops nothing):

* a poller reads the registry and surveys every batch (``survey``) every ``POLL_S`` and
  publishes immutable ``BatchReading``s that ``readings()`` returns;
* actions (pause, resume, stop, watch, resume an interrupted run) are queued to the loop
  and talk to the worker's control socket with ``BatchClient``; a failure is kept as the
  batch's ``error``, never raised to the caller;
* a watched batch gets one ``/events`` follower that keeps the ``delta`` and ``request``
  events of watched requests (the engine's own ``CaptureEvent`` structs) in a bounded
  buffer, which a reader drains a few times a second (``take_events``), so whoever shows
  them updates in batches, never per token.

Why it owns a thread and an event loop rather than borrowing its caller's: the control
clients are kept open from poll to poll (a new httpx client per poll costs an SSL context,
tens of ms holding the GIL), an httpx client belongs to the loop that opened it, and an
``/events`` follower lives as long as its batch is watched. One long-lived loop owns them
all; the caller (the dashboard's UI loop) only reads the last published readings and
queues actions, so it never waits on a socket, and this module needs no UI to run.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from eagle_tui.core.batches.api import Disconnected, Lost, RecentSample, RecentSamples
from eagle_tui.core.batches.control_client import BatchClient
from eagle_tui.core.batches.detach import relaunch
from eagle_tui.core.batches.events import END, HELLO
from eagle_tui.core.batches.registry import BatchRecord, Registry
from eagle_tui.core.batches.survey import BatchView, survey_all, unanswered
from eagle_tui.core.batchstate import FINAL_STATES, RESUMABLE_STATES
from eagle_tui.core.capture.events import CaptureEvent, DeltaEvent, RequestEvent
from eagle_tui.core.errors import BatchError
from eagle_tui.core.shards.batchdir.lock import is_held

log = logging.getLogger(__name__)

POLL_S = 0.5
SURVEY_TIMEOUT_S = 2.0
EVENT_BUFFER = 50_000
HELLO_WAIT_S = 45.0
"""How long a watch waits for its event subscription before asking the worker to stream.
Streaming before we are subscribed loses the first ids of the requests it starts, so the
wait is as long as the event stream's own read timeout: a loaded machine took over 3 s."""
CLOSE_WAIT_S = 0.5
"""How long closing waits for the loop's thread (a daemon: it never holds the exit up)."""
_ENDED_KINDS = frozenset({"finished", "failed", "rejected"})

T = TypeVar("T")


@dataclass(frozen=True)
class ShardCounters:
    """What a finished batch's shards hold, read by the caller's functions (parquet, which
    batch bookkeeping does not import): flags by kind, and output tokens (None: unknown)."""

    flags: Callable[[Path], dict[str, int]]
    tokens: Callable[[Path], int | None]


@dataclass(frozen=True)
class BatchReading:
    """One batch as last surveyed, what the last action on it said, and (for a batch no
    worker runs) its flags by kind and output tokens as counted in its shards."""

    view: BatchView
    error: str | None = None
    flags: dict[str, int] | None = None
    stored_tokens: int | None = None

    @property
    def batch_id(self) -> str:
        """The batch's id in the registry."""
        return self.view.record.id


class BatchMonitor:
    """The registry's batches and their control sockets, followed on a private loop.

    ``shards`` count what a batch no worker runs holds, once per batch and row count, in a
    thread of the loop's executor (without them, readings carry no such counts).
    """

    def __init__(self, registry: Registry | None = None, *, poll_s: float = POLL_S,
                 shards: ShardCounters | None = None) -> None:
        self._registry = registry
        self._poll_s = poll_s
        self._shards = shards
        self._readings: tuple[BatchReading, ...] = ()
        self._records: dict[str, BatchRecord] = {}
        self._cache: dict[str, BatchView] = {}
        self._errors: dict[str, str] = {}
        self._shard_flags: dict[tuple[str, int], dict[str, int]] = {}
        self._shard_tokens: dict[tuple[str, int], int | None] = {}
        self._events: dict[str, deque[CaptureEvent]] = {}
        self._watched: dict[str, set[str]] = {}
        """Per batch, the samples being streamed: kept when a follower is started again, so
        the end of a request that began under the old one still reaches the reader."""
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

    # -- reading -----------------------------------------------------------------------------

    def readings(self) -> tuple[BatchReading, ...]:
        """Every batch in the registry as last surveyed (non-blocking; starts the loop)."""
        self._ensure_thread()
        return self._readings

    def take_events(self, batch_id: str, limit: int = 10_000) -> list[CaptureEvent]:
        """Events of watched requests since the last call (oldest first)."""
        events = self._events.get(batch_id)
        if events is None:
            return []
        taken: list[CaptureEvent] = []
        with contextlib.suppress(IndexError):
            while len(taken) < limit:
                taken.append(events.popleft())
        return taken

    def following(self, batch_id: str) -> bool:
        """True while events of ``batch_id`` may still come (its follower runs, or events
        it received are not taken yet)."""
        task = self._followers.get(batch_id)
        return (task is not None and not task.done()) or bool(self._events.get(batch_id))

    def recent_samples(self, batch_id: str) -> list[RecentSample]:
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
        return list(reply.samples)

    # -- actions (queued to the loop; an error is kept on the batch) -------------------------

    def launched(self, batch_id: str) -> None:
        """A worker was just launched for ``batch_id``: forget its old error, look now."""
        self._errors.pop(batch_id, None)
        self._poke()

    def pause(self, batch_id: str) -> None:
        """Send no new requests (in-flight ones finish)."""
        self._submit(batch_id, lambda c: c.pause())

    def resume(self, batch_id: str) -> None:
        """Resume a paused batch; start a new worker for a stopped, failed or interrupted one."""
        reading = next((r for r in self._readings if r.batch_id == batch_id), None)
        if reading is not None and reading.view.state in RESUMABLE_STATES:
            self._schedule(batch_id, self._relaunch(batch_id))
        else:
            self._submit(batch_id, lambda c: c.resume())

    def stop(self, batch_id: str, *, abort: bool) -> None:
        """Stop: drain in-flight requests (``abort`` False) or abort them."""
        self._submit(batch_id, lambda c: c.stop(abort=abort))

    def watch(self, batch_id: str, count: int) -> None:
        """Stream the next ``count`` requests (their events come through ``take_events``)."""
        self._schedule(batch_id, self._watch(batch_id, count))

    def close(self) -> None:
        """Stop following (the batches keep running: they are detached). Idempotent."""
        self._closed = True
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(self._shutdown)
            thread.join(timeout=CLOSE_WAIT_S)

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
        if _released(out_dir, timeout_s):
            return True
        pid = self.registry.load(batch_id).pid
        if pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        return _released(out_dir, 5.0)

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
        except Exception:  # the thread must never take its caller down
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
        readings = []
        for record in records:
            view = self._cache[record.id]
            flags, tokens = await self._counted_in_shards(view)
            readings.append(BatchReading(view, self._errors.get(record.id), flags, tokens))
        self._readings = tuple(readings)

    async def _counted_in_shards(self, view: BatchView) -> tuple[dict[str, int] | None,
                                                                  int | None]:
        """Flags by kind and output tokens of a batch no worker runs, each counted once per
        row count from its shards (a running worker counts flags by kind, and tokens of its
        own run only)."""
        progress, shards = view.progress, self._shards
        if shards is None or view.live or progress is None:
            return None, None
        key, out_dir = (view.record.id, progress.done), Path(view.record.out_dir)
        flags = tokens = None
        if progress.flagged:
            flags = await _once(self._shard_flags, key, shards.flags, out_dir) or None
        if progress.done:
            tokens = await _once(self._shard_tokens, key, shards.tokens, out_dir)
        return flags, tokens

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
        except Exception as exc:  # kept on the batch, never raised to the caller
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


async def _once(cache: dict[tuple[str, int], T], key: tuple[str, int],
                count: Callable[[Path], T], out_dir: Path) -> T:
    """``count(out_dir)`` in a thread, unless ``cache`` holds it under ``key`` already."""
    if key not in cache:
        cache[key] = await asyncio.to_thread(count, out_dir)
    return cache[key]


def _released(out_dir: Path, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for no worker to hold ``out_dir``; True once none does."""
    deadline = time.monotonic() + timeout_s
    while is_held(out_dir):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


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

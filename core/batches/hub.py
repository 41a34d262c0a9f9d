"""Fan-out of a worker's events to its ``/events`` clients, bounded per client.

The engine calls ``EventHub.publish`` synchronously on the event loop for every event, so
publishing only appends to each client's deque and sets a flag: no encoding, no I/O, no
awaiting. Each client's queue holds at most ``max_queued`` request/delta events; beyond
that the oldest are dropped and the client is told how many (a ``lost`` event). Progress
is not queued at all: each client has one slot that the next snapshot overwrites, so a
client that reads slowly (or not at all) costs a fixed amount of memory and nothing else,
and never holds the capture back.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from eagle_tui.core.batches.api import ClientStats, End, EventBody, Lost, ProgressEvent
from eagle_tui.core.batches.events import END, LOST, PROGRESS, capture_event_frame
from eagle_tui.core.capture.events import CaptureEvent

Frame = tuple[str, EventBody]

MAX_QUEUED = 4096
MAX_FRAMES_PER_TAKE = 256


class HubFull(Exception):
    """Too many event clients are connected already."""


class Subscriber:
    """One ``/events`` client's bounded queue and progress slot."""

    def __init__(self, sub_id: int, max_queued: int) -> None:
        self.id = sub_id
        self.max_queued = max_queued
        self.connected_at = time.time()
        self.dropped = 0
        self.delivered = 0
        self._queue: deque[CaptureEvent] = deque()
        self._progress: ProgressEvent | None = None
        self._end: End | None = None
        self._unreported = 0
        self._wake = asyncio.Event()
        self.ended = False

    @property
    def queued(self) -> int:
        """Events waiting to be sent."""
        return len(self._queue)

    def offer(self, event: CaptureEvent) -> None:
        """Queue ``event``, dropping the oldest one when the queue is full."""
        if len(self._queue) >= self.max_queued:
            self._queue.popleft()
            self.dropped += 1
            self._unreported += 1
        self._queue.append(event)
        self._wake.set()

    def offer_progress(self, data: ProgressEvent) -> None:
        """Replace the pending progress snapshot (never queues)."""
        self._progress = data
        self._wake.set()

    def finish(self, data: End) -> None:
        """The batch ended: after what is queued, send ``end`` and close."""
        self._end = data
        self._wake.set()

    async def take(self, timeout: float) -> list[Frame]:
        """The next frames to send, in order; [] when nothing came within ``timeout``."""
        if not self._pending():
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                return []
        self._wake.clear()
        frames: list[Frame] = []
        if self._unreported:
            frames.append((LOST, Lost(dropped=self._unreported)))
            self._unreported = 0
        while self._queue and len(frames) < MAX_FRAMES_PER_TAKE:
            frames.append(capture_event_frame(self._queue.popleft()))
        if self._progress is not None:
            frames.append((PROGRESS, self._progress))
            self._progress = None
        if self._end is not None and not self._queue:
            frames.append((END, self._end))
            self.ended = True
        if self._pending():
            self._wake.set()
        self.delivered += len(frames)
        return frames

    def _pending(self) -> bool:
        return bool(self._queue or self._unreported or self._progress is not None
                    or (self._end is not None and not self.ended))

    def stats(self) -> ClientStats:
        """Queue length, drops and deliveries, for ``/status``."""
        return ClientStats(id=self.id, queued=self.queued, max_queued=self.max_queued,
                           dropped=self.dropped, delivered=self.delivered,
                           connected_at=self.connected_at)


class EventHub:
    """All event clients of one worker."""

    def __init__(self, *, max_queued: int = MAX_QUEUED, max_subscribers: int = 16) -> None:
        self.max_queued = max_queued
        self.max_subscribers = max_subscribers
        self._subscribers: dict[int, Subscriber] = {}
        self._next_id = 1
        self._end: End | None = None

    @property
    def subscribers(self) -> int:
        """How many clients are connected."""
        return len(self._subscribers)

    def publish(self, event: CaptureEvent) -> None:
        """The engine's event sink: queue ``event`` for every client (O(clients), no I/O)."""
        for subscriber in self._subscribers.values():
            subscriber.offer(event)

    def publish_progress(self, data: ProgressEvent) -> None:
        """Offer a progress snapshot to every client (each keeps only the newest)."""
        for subscriber in self._subscribers.values():
            subscriber.offer_progress(data)

    def finish(self, data: End) -> None:
        """The batch ended; every client (also later ones) gets ``end`` and is closed."""
        self._end = data
        for subscriber in self._subscribers.values():
            subscriber.finish(data)

    def subscribe(self) -> Subscriber:
        """A new client; HubFull when ``max_subscribers`` are connected."""
        if len(self._subscribers) >= self.max_subscribers:
            raise HubFull(f"{len(self._subscribers)} event clients are connected already")
        subscriber = Subscriber(self._next_id, self.max_queued)
        self._next_id += 1
        self._subscribers[subscriber.id] = subscriber
        if self._end is not None:
            subscriber.finish(self._end)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        """Forget a client (its connection closed)."""
        self._subscribers.pop(subscriber.id, None)

    def stats(self) -> tuple[ClientStats, ...]:
        """Per-client queue statistics."""
        return tuple(s.stats() for s in self._subscribers.values())

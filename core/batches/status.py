"""The ``GET /status`` snapshot of a running worker, and the bookkeeping behind it.

The document is ``api.StatusDoc`` (every field always present)::

    {"schema": 1, "at": <unix s>,
     "batch": {"id", "name", "out_dir", "pid", "socket", "log", "started_at", "runs"},
     "state": starting|running|paused|stopping|done|stopped|failed,
     "progress": {total, already_done, done, written, failed, flagged, rejected, retrying,
                  interrupted, in_flight, output_tokens, settled, remaining, elapsed_s,
                  samples_per_s, tokens_per_s, eta_s},
     "servers": [{url, state, reason, in_flight, limit, sent, succeeded, failed}],
     "errors": {kind: failed attempts}, "failures": {kind: rows given up},
     "flags": {flag: rows},
     "recent_errors": {kind: [{at, sample_id, rid, endpoint, detail, final}]} (newest last),
     "watch": {"requested": n, "started": n},
     "shards": [{name, rows, bytes, flagged}], "manifest": {done, failed, flagged, rejected},
     "events": {"clients": [{id, queued, max_queued, dropped, delivered, connected_at}]}}
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from pathlib import Path

import msgspec

from eagle_tui.core.batches.api import (
    STATUS_SCHEMA,
    BatchInfo,
    EventClients,
    RecentError,
    ShardSummary,
    StatusDoc,
    WatchReply,
)
from eagle_tui.core.batches.hub import EventHub
from eagle_tui.core.batchstate import public_state
from eagle_tui.core.capture.events import CaptureEvent, RequestEvent
from eagle_tui.core.capture.progress import CaptureProgress
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.shards.batchdir.layout import BatchDir
from eagle_tui.core.shards.manifest import Counts, Manifest

__all__ = ["STATUS_SCHEMA", "RecentErrors", "ShardList", "StatusBuilder", "WatchTally"]


class RecentErrors:
    """The last few errors of each kind (from ``retry``/``failed``/``rejected`` events)."""

    def __init__(self, per_kind: int = 5, max_kinds: int = 32) -> None:
        self._per_kind = per_kind
        self._max_kinds = max_kinds
        self._by_kind: OrderedDict[str, deque[RecentError]] = OrderedDict()

    def note(self, event: CaptureEvent) -> None:
        """Keep ``event`` if it reports an error."""
        if not isinstance(event, RequestEvent) or event.kind not in ("retry", "failed",
                                                                       "rejected"):
            return
        kind = event.error_kind or event.kind
        recent = self._by_kind.pop(kind, None) or deque(maxlen=self._per_kind)
        recent.append(RecentError(at=event.at, sample_id=event.sample_id, rid=event.rid,
                                  endpoint=event.endpoint, detail=event.detail,
                                  final=event.kind != "retry"))
        self._by_kind[kind] = recent  # most recently seen kinds last
        while len(self._by_kind) > self._max_kinds:
            self._by_kind.popitem(last=False)

    def to_json(self) -> dict[str, tuple[RecentError, ...]]:
        """Kind -> recent errors, oldest first."""
        return {kind: tuple(items) for kind, items in self._by_kind.items()}


class WatchTally:
    """How many requests were asked to be watched, and how many have started streaming."""

    def __init__(self) -> None:
        self.requested = 0
        self.started = 0

    def note(self, event: CaptureEvent) -> None:
        """Count watched attempts as they go out."""
        if isinstance(event, RequestEvent) and event.kind == "sent" and event.watched:
            self.started += 1


class ShardList:
    """The shards listed in ``manifest.json``, re-read only when the file changed."""

    def __init__(self, out_dir: Path) -> None:
        self._path = BatchDir(out_dir).manifest
        self._seen: tuple[int, int] | None = None
        self._shards: tuple[ShardSummary, ...] = ()
        self._counts = Counts()

    async def read(self) -> tuple[tuple[ShardSummary, ...], Counts]:
        """(shards, manifest counts) as of the manifest on disk now."""
        try:
            info = self._path.stat()
        except FileNotFoundError:
            return self._shards, self._counts
        if (info.st_mtime_ns, info.st_size) != self._seen:
            try:
                manifest = await asyncio.to_thread(Manifest.load, self._path.parent)
            except ConfigError:  # being replaced right now; keep the last good list
                return self._shards, self._counts
            self._seen = (info.st_mtime_ns, info.st_size)
            self._shards = tuple(ShardSummary(name=s.name, rows=s.rows, bytes=s.bytes,
                                              flagged=s.flagged) for s in manifest.shards)
            self._counts = msgspec.structs.replace(manifest.counts)  # a copy
        return self._shards, self._counts


class StatusBuilder:
    """Assembles ``/status`` from the engine's snapshot and the worker's bookkeeping."""

    def __init__(self, batch: BatchInfo, progress: Callable[[], CaptureProgress],
                 hub: EventHub, recent: RecentErrors, watch: WatchTally, out_dir: Path) -> None:
        self.batch = batch
        self._progress = progress
        self._hub = hub
        self._recent = recent
        self._watch = watch
        self._shards = ShardList(out_dir)

    async def build(self) -> StatusDoc:
        """The status document (see the module docstring)."""
        progress = self._progress()
        shards, counts = await self._shards.read()
        return StatusDoc(
            schema=STATUS_SCHEMA,
            at=time.time(),
            batch=self.batch,
            state=public_state(progress.state),
            progress=progress.counts,
            servers=progress.servers,
            errors=progress.errors,
            failures=progress.failures,
            flags=progress.flags,
            recent_errors=self._recent.to_json(),
            watch=WatchReply(requested=self._watch.requested, started=self._watch.started),
            shards=shards,
            manifest=counts,
            events=EventClients(clients=self._hub.stats()),
        )

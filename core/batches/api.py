"""Every JSON document of a batch worker's control API, declared once as msgspec structs.

The worker encodes them and ``BatchClient`` decodes them from these same declarations;
requests are refused (400) and replies and events are refused (``BatchError``) when a
field has the wrong type, naming the field.

    requests   StopRequest {grace_s, abort}, WatchRequest {count}; /pause and /resume
               take no fields (``NoFields``); unknown fields are refused
    replies    StateReply {state}, WatchReply {requested, started}, ErrorReply {error},
               StatusDoc (``GET /status``), RecentSamples (``GET /recent``)
    events     Hello, ProgressEvent, RequestEvent, DeltaEvent, Lost, End (``GET /events``,
               see ``core.batches.events``); Disconnected is made by the client

Three shapes belong to the engine and are declared where it makes them: ``Progress``
(counters, rates and ETA: ``core.capture.progress``, also what the registry keeps as a
batch's last known progress), ``RequestEvent`` and ``DeltaEvent`` (the engine's own events,
``core.capture.events``). Readers ignore fields they do not know, so an older dashboard can
follow a newer worker.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec
from msgspec import UNSET, UnsetType

from eagle_tui.core.accept.requests import RequestAcceptance
from eagle_tui.core.batchstate import BatchState, public_state
from eagle_tui.core.capture.dispatch import ServerStatus
from eagle_tui.core.capture.events import DeltaEvent, RequestEvent
from eagle_tui.core.capture.progress import CaptureProgress, Progress
from eagle_tui.core.shards.manifest import Counts
from eagle_tui.core.wire import Wire

STATUS_SCHEMA = 1
MAX_WATCH = 100_000
MAX_GRACE_S = 7 * 24 * 3600.0

# -- requests -------------------------------------------------------------------------------


class Request(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
              omit_defaults=True):
    """Base of the request bodies: unknown fields are refused; defaults are not sent."""

    USAGE: ClassVar[str] = "send {}"


class NoFields(Request, frozen=True):
    """``POST /pause`` and ``POST /resume``: an empty object (or no body)."""

    USAGE: ClassVar[str] = "send no body or {}"


class StopRequest(Request, frozen=True):
    """``POST /stop``: drain for ``grace_s`` (default: the batch's setting), then abort;
    ``abort`` aborts at once."""

    USAGE: ClassVar[str] = (f"grace_s must be a number of seconds in [0, {MAX_GRACE_S:g}], "
                            "abort true or false")

    grace_s: Annotated[float, msgspec.Meta(ge=0, le=MAX_GRACE_S)] | None = None
    abort: bool = False


class WatchRequest(Request, frozen=True):
    """``POST /watch``: stream the next ``count`` requests."""

    USAGE: ClassVar[str] = f"count must be an integer in [1, {MAX_WATCH}]"

    count: Annotated[int, msgspec.Meta(ge=1, le=MAX_WATCH)]


# -- replies --------------------------------------------------------------------------------


class StateReply(Wire, frozen=True):
    """The answer to /pause, /resume and /stop."""

    state: BatchState


class WatchReply(Wire, frozen=True):
    """Watched requests asked for, and started so far."""

    requested: int
    started: int


class ErrorReply(Wire, frozen=True):
    """Every 4xx and 5xx answer."""

    error: str


class BatchInfo(Wire, frozen=True):
    """Which batch a worker runs (``/status`` and ``hello``)."""

    id: str
    name: str
    out_dir: str
    pid: int | None = None
    socket: str = ""
    log: str = ""
    started_at: float | None = None
    runs: int = 0


class RecentError(Wire, frozen=True):
    """One recent failed attempt (``final``: the row was given up)."""

    at: float
    sample_id: str
    rid: str | None
    endpoint: str | None
    detail: str | None
    final: bool


class ShardSummary(Wire, frozen=True):
    """One complete shard as ``/status`` lists it."""

    name: str
    rows: int
    bytes: int
    flagged: int


class ClientStats(Wire, frozen=True):
    """One ``/events`` client's queue."""

    id: int
    queued: int
    max_queued: int
    dropped: int
    delivered: int
    connected_at: float


class EventClients(Wire, frozen=True):
    """The ``/events`` clients connected now."""

    clients: tuple[ClientStats, ...] = ()


class RecentSample(Wire, frozen=True):
    """One row the worker stored (or will store with its next shard), as ``GET /recent``
    lists it: what a spot-check needs before the first shard is written."""

    sample_id: str
    input_ids: tuple[int, ...]
    prompt_len: int
    finish_reason: str
    matched_stop: int | None = None
    think_end: int = -1
    flags: tuple[str, ...] = ()
    endpoint: str = ""
    rid: str = ""
    latency_s: float = 0.0
    created_at: float = 0.0
    # A speculating server's figures for the row (unwritten without, as before them)
    acceptance: RequestAcceptance | UnsetType = UNSET


class RecentSamples(Wire, frozen=True):
    """``GET /recent``: the newest finished rows of a running batch, oldest first."""

    samples: tuple[RecentSample, ...] = ()


class StatusDoc(Wire, frozen=True):
    """``GET /status``: a running worker's snapshot (see ``core.batches.status``)."""

    schema: int
    at: float
    batch: BatchInfo
    state: BatchState
    progress: Progress
    servers: tuple[ServerStatus, ...] = ()
    errors: dict[str, int] = msgspec.field(default_factory=dict)
    failures: dict[str, int] = msgspec.field(default_factory=dict)
    flags: dict[str, int] = msgspec.field(default_factory=dict)
    recent_errors: dict[str, tuple[RecentError, ...]] = msgspec.field(default_factory=dict)
    watch: WatchReply = WatchReply(requested=0, started=0)
    shards: tuple[ShardSummary, ...] = ()
    manifest: Counts = msgspec.field(default_factory=Counts)
    events: EventClients = EventClients()


# -- events ---------------------------------------------------------------------------------

class Hello(Wire, frozen=True):
    """First event of every connection."""

    batch: BatchInfo
    state: BatchState
    progress: Progress
    servers: tuple[ServerStatus, ...] = ()


class ProgressEvent(Wire, frozen=True):
    """A coalesced snapshot (at most ``PROGRESS_HZ`` a second)."""

    at: float
    state: BatchState
    progress: Progress
    servers: tuple[ServerStatus, ...] = ()

    @classmethod
    def of(cls, progress: CaptureProgress, at: float) -> ProgressEvent:
        """The snapshot event of an engine snapshot taken at ``at``."""
        return cls(at=at, state=public_state(progress.state), progress=progress.counts,
                   servers=progress.servers)


class Lost(Wire, frozen=True):
    """``dropped`` request/delta events were dropped for this (slow) client."""

    dropped: int


class End(Wire, frozen=True):
    """The batch ended (``done``, ``stopped`` or ``failed``); the stream closes after it."""

    state: BatchState
    reason: str | None = None
    exit_code: int | None = None
    progress: Progress = Progress()


class Disconnected(Wire, frozen=True):
    """Made by the client, never sent: the stream broke (it reconnects if it can)."""

    reason: str


class Unrecognized(Wire, frozen=True):
    """An event type this version does not know (a newer worker): its data, undecoded."""

    data: str


EventBody = (Hello | ProgressEvent | RequestEvent | DeltaEvent | Lost | End | Disconnected
             | Unrecognized)


__all__ = [
    "MAX_GRACE_S",
    "MAX_WATCH",
    "STATUS_SCHEMA",
    "BatchInfo",
    "ClientStats",
    "Disconnected",
    "End",
    "ErrorReply",
    "EventBody",
    "EventClients",
    "Hello",
    "Lost",
    "NoFields",
    "ProgressEvent",
    "RecentError",
    "RecentSample",
    "RecentSamples",
    "Request",
    "ShardSummary",
    "StateReply",
    "StatusDoc",
    "StopRequest",
    "Unrecognized",
    "WatchReply",
    "WatchRequest",
]

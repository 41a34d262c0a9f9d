"""Per-request lifecycle events a batch emits to an optional sink.

The sink is called on the event loop, synchronously, for every event, so it must be
cheap and must not block (queue the event and return). ``delta`` events exist only for
*watched* requests (sent with ``stream: true``); all others are sent without streaming.

    kind       when                                        fields set
    sent       an attempt goes out                         rid, endpoint, attempt, watched
    delta      new output ids of a watched request         rid, new_ids, total
    retry      an attempt failed transiently               rid, endpoint, error_kind, detail
    finished   the row is generated and validated          rid, endpoint, total, flags,
                                                           acceptance (speculative servers)
    failed     the row failed permanently                  rid, endpoint, error_kind, detail
    rejected   the prompt was refused before sending       error_kind, detail

The two structs are also the bodies of a worker's ``request`` and ``delta`` events
(``core.batches.events``): the engine's event is what goes on the wire, declared once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

from msgspec import UNSET, UnsetType

from eagle_tui.core.accept.requests import RequestAcceptance
from eagle_tui.core.wire import Wire

RequestKind = Literal["sent", "retry", "finished", "failed", "rejected"]
EventKind = Literal[RequestKind, "delta"]


class RequestEvent(Wire, frozen=True):
    """One lifecycle step of one row (``sample_id``) of a batch: any kind but ``delta``."""

    kind: RequestKind
    sample_id: str
    at: float
    rid: str | None = None
    endpoint: str | None = None
    attempt: int = 0
    watched: bool = False
    total: int = 0
    flags: tuple[str, ...] = ()
    error_kind: str | None = None
    detail: str | None = None
    # a speculative server's finished answer; unset (not written) otherwise, so the
    # documents of servers without speculation stay as they were
    acceptance: RequestAcceptance | UnsetType = UNSET


class DeltaEvent(Wire, frozen=True):
    """New output ids of a watched request; a rid's ``new_ids`` concatenated are its output,
    ``total`` counts every output id so far."""

    kind: ClassVar[Literal["delta"]] = "delta"

    sample_id: str
    rid: str | None
    new_ids: tuple[int, ...]
    total: int
    at: float


CaptureEvent = RequestEvent | DeltaEvent
EventSink = Callable[[CaptureEvent], None]

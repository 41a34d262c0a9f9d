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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from eagle_tui.core.accept.requests import RequestAcceptance

EventKind = Literal["sent", "delta", "retry", "finished", "failed", "rejected"]


@dataclass(frozen=True, slots=True)
class CaptureEvent:
    """One lifecycle event of one row (``sample_id``) of a batch."""

    kind: EventKind
    sample_id: str
    at: float
    rid: str | None = None
    endpoint: str | None = None
    attempt: int = 0
    watched: bool = False
    new_ids: tuple[int, ...] = ()
    total: int = 0
    flags: tuple[str, ...] = ()
    error_kind: str | None = None
    detail: str | None = None
    acceptance: RequestAcceptance | None = None  # from a speculative server's meta_info


EventSink = Callable[[CaptureEvent], None]

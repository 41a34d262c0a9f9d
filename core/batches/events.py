"""The ``GET /events`` stream: server-sent events, their types and their framing.

Every event is ``event: <type>`` / ``id: <seq>`` / ``data: <one JSON object>``; ``seq``
counts up per connection. Types, in the order a client meets them (the bodies are the
structs of ``core.batches.api``)::

    hello     first event of every connection: Hello {batch: {id, name, out_dir, pid,
              socket, log, started_at, runs}, state, progress, servers}
    progress  a coalesced snapshot, at most PROGRESS_HZ per second (a slow reader only
              ever gets the newest one): ProgressEvent {at, state, progress, servers}
    request   one lifecycle step of one row: RequestEvent {kind: sent|retry|finished|
              failed|rejected, sample_id, at, rid, endpoint, attempt, watched, total, flags,
              error_kind, detail}
    delta     new output ids of a *watched* request: DeltaEvent {sample_id, rid, new_ids,
              total, at}; the concatenated ``new_ids`` of one rid are its output ids
    lost      Lost {dropped: n}: n request/delta events were dropped for this client because
              it read too slowly (its queue is bounded); token streams it was assembling
              may have gaps
    end       the batch ended: End {state: done|stopped|failed, reason, exit_code,
              progress}; the worker closes the stream after it

Lines starting with ``:`` are keep-alives. ``progress`` (here and in ``/status``) is
``core.capture.progress.Progress``: counters, rates and ETA; ``request`` and ``delta`` bodies
are the engine's own events (``core.capture.events``). The client decodes each
body with the struct of its type; one that does not fit is a ``BatchError`` naming the
field, an event type it does not know arrives as ``Unrecognized``.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from eagle_tui.core.batches.api import (
    End,
    EventBody,
    Hello,
    Lost,
    ProgressEvent,
    Unrecognized,
)
from eagle_tui.core.capture.events import CaptureEvent, DeltaEvent, RequestEvent
from eagle_tui.core.errors import BatchError
from eagle_tui.core.wire import ENCODER, explain

HELLO, PROGRESS, REQUEST, DELTA, LOST, END = "hello", "progress", "request", "delta", "lost", "end"
DISCONNECTED = "disconnected"
"""Made by the client, never sent: the stream broke; it reconnects if the worker returns."""

PROGRESS_HZ = 4.0

_DECODERS: dict[str, msgspec.json.Decoder[EventBody]] = {
    HELLO: msgspec.json.Decoder(Hello),
    PROGRESS: msgspec.json.Decoder(ProgressEvent),
    REQUEST: msgspec.json.Decoder(RequestEvent),
    DELTA: msgspec.json.Decoder(DeltaEvent),
    LOST: msgspec.json.Decoder(Lost),
    END: msgspec.json.Decoder(End),
}


def capture_event_frame(event: CaptureEvent) -> tuple[str, EventBody]:
    """(SSE type, body) of an engine event: the event itself."""
    return (DELTA if isinstance(event, DeltaEvent) else REQUEST), event


def sse_frame(kind: str, seq: int, data: EventBody) -> bytes:
    """One server-sent event, encoded."""
    return b"event: %s\nid: %d\ndata: %s\n\n" % (kind.encode(), seq, ENCODER.encode(data))


@dataclass(frozen=True)
class BatchEvent:
    """One event as a client receives it: its type and its decoded body."""

    type: str
    data: EventBody
    seq: int | None = None


class SSEDecoder:
    """Turns the lines of an SSE stream into ``BatchEvent``s (``feed`` one line at a time).

    A body that does not fit its type is a ``BatchError`` naming the field.
    """

    def __init__(self) -> None:
        self._type = "message"
        self._data: list[str] = []
        self._seq: int | None = None

    def feed(self, line: str) -> BatchEvent | None:
        """The event a blank line completes, else None."""
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._type = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and value.isdigit():
            self._seq = int(value)
        return None

    def _dispatch(self) -> BatchEvent | None:
        kind, lines, seq = self._type, self._data, self._seq
        self._type, self._data, self._seq = "message", [], None
        if not lines:
            return None
        text = "\n".join(lines)
        decoder = _DECODERS.get(kind)
        if decoder is None:
            return BatchEvent(kind, Unrecognized(data=text), seq)
        try:
            return BatchEvent(kind, decoder.decode(text), seq)
        except msgspec.DecodeError as e:
            raise BatchError(
                f"the batch worker sent a {kind!r} event that does not fit ({explain(e)}); "
                "it may run another eagle-tui version: stop it and `eagle-tui resume` it "
                "with this one") from None


__all__ = [
    "DELTA",
    "DISCONNECTED",
    "END",
    "HELLO",
    "LOST",
    "PROGRESS",
    "PROGRESS_HZ",
    "REQUEST",
    "BatchEvent",
    "SSEDecoder",
    "capture_event_frame",
    "sse_frame",
]

"""The ``GET /events`` stream: server-sent events and their JSON shapes.

Every event is ``event: <type>`` / ``id: <seq>`` / ``data: <one JSON object>``; ``seq``
counts up per connection. Types, in the order a client meets them::

    hello     first event of every connection
              {"batch": {id, name, out_dir, pid, started_at}, "state", "progress", "servers"}
    progress  a coalesced snapshot, at most PROGRESS_HZ per second (a slow reader only
              ever gets the newest one): {"at", "state", "progress", "servers"}
    request   one lifecycle step of one row: {"kind": sent|retry|finished|failed|rejected,
              "sample_id", "at", "rid", "endpoint", "attempt", "watched", "total", "flags",
              "error_kind", "detail"}
    delta     new output ids of a *watched* request: {"sample_id", "rid", "new_ids",
              "total", "at"}; the concatenated ``new_ids`` of one rid are its output ids
    lost      {"dropped": n}: n request/delta events were dropped for this client because
              it read too slowly (its queue is bounded); token streams it was assembling
              may have gaps
    end       the batch ended: {"state": done|stopped|failed, "reason", "exit_code",
              "progress"}; the worker closes the stream after it

Lines starting with ``:`` are keep-alives. ``progress`` (here and in ``/status``) is
``progress_json``: counters, rates and ETA of ``CaptureProgress``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eagle_tui.core.capture.dispatch import ServerStatus
from eagle_tui.core.capture.events import CaptureEvent
from eagle_tui.core.capture.progress import CaptureProgress

HELLO, PROGRESS, REQUEST, DELTA, LOST, END = "hello", "progress", "request", "delta", "lost", "end"
DISCONNECTED = "disconnected"
"""Made by the client, never sent: the stream broke; it reconnects if the worker returns."""

PROGRESS_HZ = 4.0
_ENGINE_TO_PUBLIC = {"finished": "done"}
_COUNTERS = ("total", "already_done", "done", "written", "failed", "flagged", "rejected",
             "retrying", "interrupted", "in_flight", "output_tokens")


def public_state(engine_state: str) -> str:
    """The state name users see (the engine's ``finished`` is ``done``)."""
    return _ENGINE_TO_PUBLIC.get(engine_state, engine_state)


def progress_json(progress: CaptureProgress) -> dict[str, Any]:
    """Counters, rates and ETA of a snapshot (no servers, no per-kind tables)."""
    data: dict[str, Any] = {name: getattr(progress, name) for name in _COUNTERS}
    data.update(
        settled=progress.settled,
        remaining=progress.remaining,
        elapsed_s=round(progress.elapsed_s, 3),
        samples_per_s=round(progress.samples_per_s, 3),
        tokens_per_s=round(progress.tokens_per_s, 1),
        eta_s=None if progress.eta_s is None else round(progress.eta_s, 1),
    )
    return data


def server_json(server: ServerStatus) -> dict[str, Any]:
    """One server's state and counters."""
    return {"url": server.url, "state": server.state, "reason": server.reason,
            "in_flight": server.in_flight, "limit": server.limit, "sent": server.sent,
            "succeeded": server.succeeded, "failed": server.failed}


def snapshot_json(progress: CaptureProgress, at: float) -> dict[str, Any]:
    """The body of a ``progress`` event."""
    return {"at": at, "state": public_state(progress.state),
            "progress": progress_json(progress),
            "servers": [server_json(s) for s in progress.servers]}


def request_json(event: CaptureEvent) -> dict[str, Any]:
    """The body of a ``request`` event (any kind but ``delta``)."""
    return {"kind": event.kind, "sample_id": event.sample_id, "at": event.at,
            "rid": event.rid, "endpoint": event.endpoint, "attempt": event.attempt,
            "watched": event.watched, "total": event.total, "flags": list(event.flags),
            "error_kind": event.error_kind, "detail": event.detail}


def delta_json(event: CaptureEvent) -> dict[str, Any]:
    """The body of a ``delta`` event."""
    return {"sample_id": event.sample_id, "rid": event.rid, "new_ids": list(event.new_ids),
            "total": event.total, "at": event.at}


def capture_event_frame(event: CaptureEvent) -> tuple[str, dict[str, Any]]:
    """(SSE type, body) of an engine event."""
    if event.kind == "delta":
        return DELTA, delta_json(event)
    return REQUEST, request_json(event)


def sse_frame(kind: str, seq: int, data: Mapping[str, Any]) -> bytes:
    """One server-sent event, encoded."""
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return f"event: {kind}\nid: {seq}\ndata: {body}\n\n".encode()


@dataclass(frozen=True)
class BatchEvent:
    """One event as a client receives it."""

    type: str
    data: dict[str, Any]
    seq: int | None = None


class SSEDecoder:
    """Turns the lines of an SSE stream into ``BatchEvent``s (``feed`` one line at a time)."""

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
        try:
            data = json.loads("\n".join(lines))
        except ValueError:
            data = {"raw": "\n".join(lines)}
        if not isinstance(data, dict):
            data = {"value": data}
        return BatchEvent(kind, data, seq)

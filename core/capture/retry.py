"""What to do after a failed request: retry or give up, and what it says about the server.

The error tree's ``retryable`` answers "can sending it again help?". Dispatch needs two
more answers: does the failure count against the sample's retry budget, and does it
suggest the server is down (so it is paused until a health check re-admits it)?

    kind                 retry  budget  server
    unreachable          yes    no      pause (nothing reached it)
    connection_lost      yes    yes     pause (it may have crashed)
    busy (503)           yes    yes     pause (starting, draining or full)
    no_worker            yes    no      pause (a router with no worker: an outage)
    timeout              yes    yes     -     (the request is aborted on the server)
    server_error (5xx)   yes    yes     -     (many in a row pause it)
    bad_response         yes*   yes     -     (* not when over a size limit: ResponseTooLarge)
    aborted              yes*   yes     -     (* unless status 400)
    duplicate_rid        yes    yes     -
    unauthorized         yes    no      refuse (permanently out of the pool)
    context_too_long     no     -       -
    rejected (400)       no     -       -
    internal             no     -       -     (a bug here; logged with its traceback)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from eagle_tui.core import errors


class ServerAction(Enum):
    """What a failure implies for the server that produced it."""

    NONE = "none"
    PAUSE = "pause"
    REFUSE = "refuse"


@dataclass(frozen=True)
class Verdict:
    """The classification of one failed attempt."""

    kind: str
    retry: bool
    counts: bool
    server: ServerAction = ServerAction.NONE


# Order matters: subclasses before their parents.
_RULES: tuple[tuple[type[errors.SGLangError], str, ServerAction], ...] = (
    (errors.ServerUnreachable, "unreachable", ServerAction.PAUSE),
    (errors.ConnectionLost, "connection_lost", ServerAction.PAUSE),
    (errors.ServerBusy, "busy", ServerAction.PAUSE),
    (errors.NoWorkerAvailable, "no_worker", ServerAction.PAUSE),
    (errors.ServerTimeout, "timeout", ServerAction.NONE),
    (errors.ServerFault, "server_error", ServerAction.NONE),
    (errors.ProtocolError, "bad_response", ServerAction.NONE),
    (errors.Unauthorized, "unauthorized", ServerAction.REFUSE),
    (errors.ContextTooLong, "context_too_long", ServerAction.NONE),
    (errors.DuplicateRequestId, "duplicate_rid", ServerAction.NONE),
    (errors.RequestRejected, "rejected", ServerAction.NONE),
    (errors.RequestAborted, "aborted", ServerAction.NONE),
    (errors.StreamError, "stream_error", ServerAction.NONE),
)

# Failures that are about the server, not the sample: retry elsewhere, free of charge.
_FREE = frozenset({"unreachable", "unauthorized", "no_worker"})


def classify(error: BaseException) -> Verdict:
    """The verdict for ``error``; anything outside the SGLang error tree is ``internal``."""
    if not isinstance(error, errors.SGLangError):
        return Verdict("internal", retry=False, counts=False)
    for error_type, kind, action in _RULES:
        if isinstance(error, error_type):
            retry = error.retryable or kind == "unauthorized"
            return Verdict(kind, retry=retry, counts=kind not in _FREE, server=action)
    return Verdict("sglang_error", retry=error.retryable, counts=True)

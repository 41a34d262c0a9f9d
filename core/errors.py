"""Every error eagle-tui raises on purpose, as one small tree.

    EagleError                     base; ``str(e)`` says what, where, and what to do
    ├── ConfigError                bad user input: a file, a flag, a config field
    ├── TokenizerError             a tokenizer or chat template that cannot be loaded or used
    ├── ShardError                 (core/shards/errors.py) a shard or manifest unusable
    │   └── ShardWriteError        a shard not saved (disk full…); names the rows lost
    ├── InspectError               (core/shards/inspect_cli.py) nothing to show for a query
    ├── BatchError                 (core/batches/errors.py) detached batches
    │   ├── BatchNotFound, BatchLocked, WorkerStartFailed, WorkerUnreachable,
    │   ├── UntrustedSocket, ControlRejected (a 4xx from the control API)
    │   └── WrongState             (core/batches/cli_common.py) e.g. pausing a finished batch
    └── SGLangError                talking to an SGLang server; carries ``url`` and ``retryable``
        ├── ServerUnreachable      connection refused / reset before any response   (transient)
        ├── ServerTimeout          connect or read timeout                           (transient)
        ├── ConnectionLost         the connection dropped mid-response (server crash?) (transient)
        ├── ServerBusy             503: starting, draining or queue full             (transient)
        ├── ServerFault            another 5xx                                       (transient)
        ├── ProtocolError          a body that is not what SGLang sends              (transient)
        ├── Unauthorized           401: missing or wrong API key                     (permanent)
        ├── RequestRejected        400: the request itself is wrong                  (permanent)
        │   ├── ContextTooLong     prompt (+ max_new_tokens) exceeds the context     (permanent)
        │   └── DuplicateRequestId the rid is still in flight on the server          (transient)
        ├── StreamError            an in-band ``{"error": ...}`` chunk in an SSE stream
        └── RequestAborted         ``finish_reason.type == "abort"``; ``partial`` holds what came

``retryable`` answers one question: can sending the same request again help?
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eagle_tui.core.sglang.types import GenerateResult


class EagleError(Exception):
    """Base of every deliberate eagle-tui error."""


class ConfigError(EagleError):
    """User input (file, flag, config field) that cannot be used as given."""


class TokenizerError(EagleError):
    """A tokenizer or chat template that cannot be loaded or applied."""


class SGLangError(EagleError):
    """A failure while talking to an SGLang server.

    ``url`` is the endpoint that failed; ``retryable`` says whether sending the
    same request again can help; ``status`` is the HTTP status when there was one.
    """

    retryable: bool = False

    def __init__(self, message: str, *, url: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.url = url
        self.status = status

    def __str__(self) -> str:
        where = f" [{self.url}]" if self.url else ""
        hint = "retrying may help" if self.retryable else "retrying will not help"
        return f"{self.message}{where} ({hint})"


class ServerUnreachable(SGLangError):
    """Nothing accepted the connection (refused, reset, DNS)."""

    retryable = True


class ServerTimeout(SGLangError):
    """The server did not connect or answer within the timeout."""

    retryable = True


class ConnectionLost(SGLangError):
    """The connection closed before a complete response arrived."""

    retryable = True


class ServerBusy(SGLangError):
    """HTTP 503: the server is starting, draining, unhealthy or its queue is full."""

    retryable = True


class ServerFault(SGLangError):
    """An HTTP 5xx other than 503."""

    retryable = True


class ProtocolError(SGLangError):
    """A response whose body or framing is not what SGLang sends."""

    retryable = True


class Unauthorized(SGLangError):
    """HTTP 401: the server wants an API key (``--api-key``) and ours is missing or wrong."""


class RequestRejected(SGLangError):
    """HTTP 400: the server refused the request as malformed or out of range."""


class ContextTooLong(RequestRejected):
    """The prompt, or prompt plus ``max_new_tokens``, exceeds the model's context."""


class DuplicateRequestId(RequestRejected):
    """The rid is already in flight on the server (often: an earlier attempt still running)."""

    retryable = True


class StreamError(SGLangError):
    """An in-band error object in an SSE stream; ``retryable`` comes from the server's own field."""

    def __init__(
        self, message: str, *, url: str = "", status: int | None = None, retryable: bool = False
    ) -> None:
        super().__init__(message, url=url, status=status)
        self.retryable = retryable


class RequestAborted(SGLangError):
    """The server finished the request with ``finish_reason.type == "abort"``.

    ``partial`` is the result as far as it got. An abort with no status (an
    ``/abort_request``, a disconnect) or a 503 may succeed when sent again; an
    abort with status 400 will not.
    """

    def __init__(
        self, message: str, *, partial: GenerateResult, url: str = "", status: int | None = None
    ) -> None:
        super().__init__(message, url=url, status=status)
        self.partial = partial
        self.retryable = status is None or status >= 500

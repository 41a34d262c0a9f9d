"""Every error eagle-tui raises on purpose, as one small tree, all defined in this file.

    EagleError                     base; ``str(e)`` says what, where, and what to do
    ├── ConfigError                bad user input: a file, a flag, a config field
    │   ├── BadURL                 a URL that cannot be a server's base URL (says why, not the URL)
    │   └── UntrustedOutput        a batch directory not ours, or writable by others
    ├── TokenizerError             a tokenizer or chat template that cannot be loaded or used
    ├── ShardError                 a shard or shard directory that cannot be read as one
    │   └── ShardWriteError        a shard not saved (disk full…); names the rows lost
    ├── ExportError                an export that cannot be made as asked (mixed or overlapping
    │                              batches, an output already there); nothing is left behind
    ├── OutputWriteError           another batch file not written (manifest, rejects, log…)
    ├── InspectError               nothing to show for an ``inspect`` query; carries the exit code
    ├── AcceptResultError          a stored acceptance result that cannot be read or written
    ├── BatchError                 detached batches, their workers, control sockets, registry
    │   ├── BatchNotFound          no registered batch matches the name/id/directory given
    │   ├── BatchLocked            another worker (or capture) already writes that output dir
    │   ├── WorkerStartFailed      a detached worker died or refused before it started capturing
    │   ├── WorkerUnreachable      the control socket is missing or does not answer
    │   ├── UntrustedSocket        the control socket is not ours (owner or type is wrong)
    │   ├── UntrustedState         a state dir, registry or record another user could change
    │   ├── ControlRejected        the worker answered 4xx: the request itself was refused
    │   └── WrongState             the verb does not apply in the batch's state (pause a done one)
    └── SGLangError                talking to an SGLang server; carries ``url`` and ``retryable``
        ├── ServerUnreachable      connection refused / reset before any response   (transient)
        ├── ServerTimeout          connect or read timeout                           (transient)
        ├── ConnectionLost         the connection dropped mid-response (server crash?) (transient)
        ├── ServerBusy             503: starting, draining or queue full             (transient)
        ├── NoWorkerAvailable      a router with no worker to send to (503 no_available_workers)
        ├── ServerFault            another 5xx                                       (transient)
        ├── ProtocolError          a body that is not what SGLang sends              (transient)
        │   └── ResponseTooLarge   a body, stream line or id list over its limit     (permanent)
        ├── Unauthorized           401: missing or wrong API key                     (permanent)
        ├── RequestRejected        400: the request itself is wrong                  (permanent)
        │   ├── ContextTooLong     prompt (+ max_new_tokens) exceeds the context     (permanent)
        │   └── DuplicateRequestId the rid is still in flight on the server          (transient)
        ├── StreamError            an in-band ``{"error": ...}`` chunk in an SSE stream
        └── RequestAborted         ``finish_reason.type == "abort"``; ``partial`` holds what came

``retryable`` answers one question: can sending the same request again help?

Two more stand outside that tree, built-in errors so that what callers catch today
(``ValueError``, ``LookupError``) still holds; ``str(e)`` is the whole one-line message:

    UnfitFile (ValueError)         a small file read that is not a regular file (a FIFO, a
                                   device, a directory, a link) or is over its size limit
    NoServer (LookupError)         ``diagnose``: no SGLang server on this host, or several

Exceptions that never leave their module (the sim's request rejections, the dispatcher's
"no server left", a full event hub) are control flow, not errors for users, and are not
``EagleError``s. This module imports nothing of the project: every layer may use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol


class PartialResult(Protocol):
    """What an aborted request had produced (an ``eagle_tui.core.sglang.GenerateResult``)."""

    @property
    def output_ids(self) -> tuple[int, ...]: ...


class EagleError(Exception):
    """Base of every deliberate eagle-tui error."""


class ConfigError(EagleError):
    """User input (file, flag, config field) that cannot be used as given."""


class BadURL(ConfigError):
    """A URL that cannot be a server base URL (``core.urls``); ``str()`` says why, never the
    URL itself (it may hold a credential): the caller names the option and the URL shown."""


class UntrustedOutput(ConfigError):
    """A batch directory (``--out``) that is not safely ours: another user's, writable by
    others, or reached through their symlink (``core.trust``); nothing was written."""


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


class NoWorkerAvailable(SGLangError):
    """A router (SGLang's model gateway) answered that none of its workers can take the request
    (503 ``no_available_workers``): nothing reached a model, so it is an outage, not the row's
    fault."""

    retryable = True


class ServerFault(SGLangError):
    """An HTTP 5xx other than 503."""

    retryable = True


class ProtocolError(SGLangError):
    """A response whose body or framing is not what SGLang sends."""

    retryable = True


class ResponseTooLarge(ProtocolError):
    """A body, a stream line or an id list over its limit (``core.sglang.limits``): the
    request was abandoned. A server that sends that much for one request is broken."""

    retryable = False


class Unauthorized(SGLangError):
    """HTTP 401: the server wants an API key (``EAGLE_TUI_API_KEY``); ours is missing or wrong."""


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
        self, message: str, *, partial: PartialResult, url: str = "", status: int | None = None
    ) -> None:
        super().__init__(message, url=url, status=status)
        self.partial = partial
        self.retryable = status is None or status >= 500


class ShardError(EagleError):
    """A shard file or batch directory that cannot be read as one; names the path."""


class ShardWriteError(ShardError):
    """A shard (or the manifest listing it) could not be written.

    Nothing partial is left behind: no shard file, no manifest entry. ``lost_sample_ids``
    are the rows that were in that shard; they are not saved, and resume captures them again.
    """

    def __init__(self, message: str, *, path: Path, lost_sample_ids: Sequence[str]) -> None:
        super().__init__(message)
        self.path = path
        self.lost_sample_ids = tuple(lost_sample_ids)


class ExportError(EagleError):
    """An export refused before or while writing: source batches that do not belong together
    (sample ids in two of them, different tokenizers), an existing output without ``force``,
    or an output that could not be written. No partial file is left under the output name.
    """


class OutputWriteError(EagleError):
    """A file of a batch directory (manifest, rejects, failures, log, lock) could not be
    written: disk full, quota, read-only or I/O error. ``path`` names it. What was saved
    before stays valid; freeing space and resuming continues the batch."""

    def __init__(self, message: str, *, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class InspectError(EagleError):
    """A selection or tokenizer problem of ``inspect``; ``status`` is the exit code."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


class AcceptResultError(EagleError):
    """A stored acceptance result file (``core.accept.stored``) that cannot be read or
    written; ``path`` names it. Results already stored in it are never rewritten partially."""

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(message)
        self.path = path


class BatchError(EagleError):
    """Base of the errors of detached batches."""


class BatchNotFound(BatchError):
    """No registered batch matches the reference the user gave."""


class BatchLocked(BatchError):
    """The output directory is held by another worker; ``holder_pid`` when known."""

    def __init__(self, message: str, *, holder_pid: int | None = None) -> None:
        super().__init__(message)
        self.holder_pid = holder_pid


class WorkerStartFailed(BatchError):
    """A detached worker exited or refused before it started capturing."""


class WorkerUnreachable(BatchError):
    """The worker's control socket is missing, refuses connections or stopped answering."""


class UntrustedSocket(BatchError):
    """A control socket that belongs to someone else (or is not a socket): never talk to it."""


class UntrustedState(BatchError):
    """A state directory, batch registry or record that is not safely ours: owned by
    another user, writable by others, or reached through someone else's symlink. The
    message names the path and the command that fixes it (``core.trust``)."""


class ControlRejected(BatchError):
    """The worker refused a control request (HTTP 4xx); ``status`` is the HTTP status."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class WrongState(BatchError):
    """The batch is not in a state where the verb applies."""


class UnfitFile(ValueError):
    """A file that is not a regular file, or is larger than its limit; ``str()`` is the
    whole message (what, where, what to do)."""


class NoServer(LookupError):
    """Nothing to diagnose: the text says what was looked for and what to pass."""

"""Errors of detached batches, the control API and the batch registry.

Where they sit in the tree of ``core.errors``::

    EagleError
    └── BatchError              a detached batch, its worker, its control socket or registry
        ├── BatchNotFound       no registered batch matches the name/id/directory given
        ├── BatchLocked         another worker (or capture) already controls that output dir
        ├── WorkerStartFailed   a detached worker died or refused before it started capturing
        ├── WorkerUnreachable   the control socket is missing or does not answer
        ├── UntrustedSocket     the control socket is not ours (owner or type is wrong)
        └── ControlRejected     the worker answered 4xx: the request itself was refused
"""

from __future__ import annotations

from eagle_tui.core.errors import EagleError


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


class ControlRejected(BatchError):
    """The worker refused a control request (HTTP 4xx); ``status`` is the HTTP status."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status

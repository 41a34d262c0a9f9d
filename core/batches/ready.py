"""The start-up report a worker sends to the process that launched it.

The launcher passes the write end of a pipe (``--ready-fd``); the worker writes JSON lines
to it: ``{"event": "listening", "pid", "socket"}`` once its control socket accepts
connections, then ``{"event": "started"}`` once the batch is dispatching, or
``{"event": "failed", "message", "kind"}`` when it cannot start. The launcher reads until one of
the last two or end of file (the worker died: its log says why). Nothing blocks on a
launcher that has gone away.
"""

from __future__ import annotations

import os
from typing import Literal

import msgspec

LISTENING, STARTED, FAILED = "listening", "started", "failed"


class ReadyMessage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One line on the start-up pipe."""

    event: Literal["listening", "started", "failed"]
    pid: int | None = None
    socket: str | None = None
    message: str | None = None
    kind: Literal["locked", "error"] | None = None


READY_DECODER = msgspec.json.Decoder(ReadyMessage)
_ENCODER = msgspec.json.Encoder()


class ReadyChannel:
    """The worker's end; every method is a no-op without a pipe or once the reader left."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    def send(self, message: ReadyMessage) -> None:
        """Report ``message``."""
        if self._fd is None:
            return
        line = _ENCODER.encode(message) + b"\n"
        try:
            os.write(self._fd, line)
        except OSError:  # the launcher stopped waiting; the batch runs on regardless
            self.close()

    def listening(self, *, pid: int, socket: str) -> None:
        """Report that the control socket accepts connections."""
        self.send(ReadyMessage(event="listening", pid=pid, socket=socket))

    def fail(self, message: str, *, kind: Literal["locked", "error"] = "error") -> None:
        """Report that the batch cannot start (``kind``: ``locked`` or ``error``), and close."""
        self.send(ReadyMessage(event="failed", message=message, kind=kind))
        self.close()

    def started(self) -> None:
        """Report that the batch is dispatching, and close."""
        self.send(ReadyMessage(event="started"))
        self.close()

    def close(self) -> None:
        """Close the pipe (the launcher sees end of file)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

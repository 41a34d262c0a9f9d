"""The start-up report a worker sends to the process that launched it.

The launcher passes the write end of a pipe (``--ready-fd``); the worker writes JSON lines
to it: ``{"event": "listening", "pid", "socket"}`` once its control socket accepts
connections, then ``{"event": "started"}`` once the batch is dispatching, or
``{"event": "failed", "message", "kind"}`` when it cannot start. The launcher reads until one of
the last two or end of file (the worker died: its log says why). Nothing blocks on a
launcher that has gone away.
"""

from __future__ import annotations

import json
import os
from typing import Any

LISTENING, STARTED, FAILED = "listening", "started", "failed"


class ReadyChannel:
    """The worker's end; every method is a no-op without a pipe or once the reader left."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    def send(self, event: str, **fields: Any) -> None:
        """Report ``event``."""
        if self._fd is None:
            return
        line = json.dumps({"event": event, **fields}) + "\n"
        try:
            os.write(self._fd, line.encode())
        except OSError:  # the launcher stopped waiting; the batch runs on regardless
            self.close()

    def fail(self, message: str, *, kind: str = "error") -> None:
        """Report that the batch cannot start (``kind``: ``locked`` or ``error``), and close."""
        self.send(FAILED, message=message, kind=kind)
        self.close()

    def started(self) -> None:
        """Report that the batch is dispatching, and close."""
        self.send(STARTED)
        self.close()

    def close(self) -> None:
        """Close the pipe (the launcher sees end of file)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

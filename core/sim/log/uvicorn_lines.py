"""uvicorn's own log lines (startup, access log, bind errors) in SGLang's format.

SGLang configures uvicorn with ``[%(asctime)s] %(levelprefix)s %(message)s``, so
lines read ``[2026-11-30 02:28:44] INFO:     Uvicorn running on …`` and
``[…] INFO:     127.0.0.1:56842 - "POST /generate HTTP/1.1" 200 OK``.
"""

from __future__ import annotations

import logging

from uvicorn.logging import AccessFormatter, DefaultFormatter

from eagle_tui.core.sim.log.sink import SimLog

DATE_FORMAT = "%Y-%m-%d %H:%M:%S"


class _SimLogHandler(logging.Handler):
    def __init__(self, log: SimLog, formatter: logging.Formatter) -> None:
        super().__init__(logging.INFO)
        self._log = log
        self.setFormatter(formatter)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._log.raw(self.format(record) + "\n")
        except Exception:  # a logging failure must never take a request down
            self.handleError(record)


def route_uvicorn_logs(log: SimLog) -> None:
    """Send the ``uvicorn``, ``uvicorn.error`` and ``uvicorn.access`` loggers to ``log``."""
    default = DefaultFormatter("[%(asctime)s] %(levelprefix)s %(message)s", DATE_FORMAT,
                               use_colors=False)
    access = AccessFormatter(
        '[%(asctime)s] %(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s',
        DATE_FORMAT, use_colors=False,
    )
    for name, formatter in (("uvicorn", default), ("uvicorn.error", default),
                            ("uvicorn.access", access)):
        logger = logging.getLogger(name)
        logger.handlers = [_SimLogHandler(log, formatter)]
        logger.setLevel(logging.INFO)
        logger.propagate = False

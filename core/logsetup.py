"""Logging for every eagle-tui process, set up in one place, in one format.

- The dashboard (and ``demo``): a rotating file under the state directory and nothing on the
  terminal, since anything written to stdout or stderr while Textual owns the terminal
  corrupts the screen (:func:`log_to_file`).
- ``capture`` in the foreground: everything from INFO to the batch's ``capture.log``, and
  warnings on stderr, one terminal-safe line each (:func:`log_to_batch`).
- The detached worker and the demo's keeper: stderr, which whoever starts them points at
  their log file (:func:`log_to_stderr`).

Each routes warnings into logging and keeps the chatty libraries at WARNING (httpx logs every
request at INFO).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterable
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import TextIO

from eagle_tui.core.fsio import describe_os_error, open_append
from eagle_tui.core.paths import state_dir
from eagle_tui.core.text import terminal_safe

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
QUIET_LOGGERS = ("httpx", "httpcore", "asyncio", "markdown_it", "uvicorn")


def default_log_file() -> Path:
    """``<state dir>/logs/tui.log``: the dashboard's."""
    return state_dir() / "logs" / "tui.log"


def log_to_file(log_file: Path | None = None, level: str = "INFO") -> Path:
    """Send all logging to ``log_file`` (default :func:`default_log_file`), rotated, and
    nothing to a stream (existing stream handlers are removed); returns the path.

    Raises OSError when the file cannot be created; the caller reports it before the app
    starts.
    """
    path = (log_file or default_log_file()).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = RotatingFileHandler(path, maxBytes=5_000_000, backupCount=3, encoding="utf-8")
    root = logging.getLogger()
    for old in list(root.handlers):
        if isinstance(old, logging.StreamHandler) and not isinstance(old, logging.FileHandler):
            root.removeHandler(old)
    _install([handler], level)
    return path


def log_to_batch(capture_log: Path) -> list[logging.Handler]:
    """Everything from INFO to ``capture_log`` (created with its directory), warnings to
    stderr; the handlers, for :func:`remove_handlers` when the capture ends. OSError
    (``UnsafeFile`` among them) when the log cannot be opened."""
    capture_log.parent.mkdir(parents=True, exist_ok=True)
    to_file = _LogFile(capture_log)
    to_stderr = _StderrHandler()
    to_stderr.setLevel(logging.WARNING)
    to_stderr.setFormatter(_SafeFormatter("%(levelname)s: %(message)s", capture_log.name))
    return _install([to_file, to_stderr], "INFO")


def log_to_stderr() -> None:
    """Everything from INFO to stderr (a process whose stderr is its log file)."""
    _install([logging.StreamHandler(sys.stderr)], "INFO")


def remove_handlers(handlers: Iterable[logging.Handler]) -> None:
    """Take ``handlers`` off the root logger and close them."""
    for handler in handlers:
        logging.getLogger().removeHandler(handler)
        handler.close()


def _install(handlers: list[logging.Handler], level: str) -> list[logging.Handler]:
    root = logging.getLogger()
    for handler in handlers:
        if handler.formatter is None:
            handler.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(handler)
    root.setLevel(level.upper())
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.captureWarnings(True)
    return handlers


class _SafeFormatter(logging.Formatter):
    """Log lines for a terminal: one line each, server text in them cannot drive it
    (``terminal_safe``), tracebacks only in the log file (named ``log_name``)."""

    def __init__(self, fmt: str, log_name: str) -> None:
        super().__init__(fmt)
        self._log_name = log_name

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info or record.exc_text or record.stack_info:
            record = logging.makeLogRecord({**record.__dict__, "exc_info": None,
                                            "exc_text": None, "stack_info": None})
            record.msg = f"{record.getMessage()} (traceback in {self._log_name})"
            record.args = None
        return terminal_safe(super().format(record))


class _LogFile(logging.StreamHandler[TextIO]):
    """A batch's log, which must never break the capture: surrogates are escaped, and a
    write error (disk full) is reported once, in one line, after which the file is left.
    Opened for appending without following a link (``open_append``): UnsafeFile (an
    OSError) for a link, FIFO or another user's file at its name."""

    def __init__(self, path: Path) -> None:
        stream = os.fdopen(open_append(path, "capture log"), "a", encoding="utf-8",
                           errors="backslashreplace")
        super().__init__(stream)
        self.baseFilename = str(path)
        self._broken = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self._broken:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        if self._broken:
            return
        self._broken = True
        error = sys.exc_info()[1]
        print(f"eagle-tui capture: cannot write {self.baseFilename} "
              f"({describe_os_error(error) if error else 'error'}); log lines from now on "
              "go to stderr only (warnings and errors)", file=sys.stderr)

    def close(self) -> None:
        # flushing what a full disk refused; ValueError: closed already
        with contextlib.suppress(OSError, ValueError):
            self.flush()
            self.stream.close()
        super().close()


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is at the time, so a live panel that redirects
    stderr shows log lines above itself instead of being torn by them. A record logged with
    ``extra={"file_only": True}`` (a crash already said in one line) stays in the file."""

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "file_only", False):
            return
        self.stream = sys.stderr
        super().emit(record)

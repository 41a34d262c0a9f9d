"""Logging for the dashboard: a rotating file under the state directory, nothing on the terminal.

While Textual owns the terminal, anything written to stdout or stderr corrupts the screen, so
the root logger gets a file handler only (existing stream handlers are removed), warnings are
routed into logging, and ``httpx``/``httpcore`` stay at WARNING (httpx logs every request at
INFO).
"""

from __future__ import annotations

import logging
from logging.handlers import RotatingFileHandler
from pathlib import Path

from eagle_tui.core.paths import state_dir

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
QUIET_LOGGERS = ("httpx", "httpcore", "asyncio", "markdown_it")


def default_log_file() -> Path:
    """``<state dir>/logs/tui.log``."""
    return state_dir() / "logs" / "tui.log"


def configure_logging(log_file: Path | None = None, level: str = "INFO") -> Path:
    """Send all logging to ``log_file`` (default :func:`default_log_file`); returns the path.

    Raises OSError when the file cannot be created; the caller reports it before the app
    starts.
    """
    path = (log_file or default_log_file()).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = RotatingFileHandler(path, maxBytes=5_000_000, backupCount=3, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        if isinstance(old, logging.StreamHandler) and not isinstance(old, logging.FileHandler):
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.captureWarnings(True)
    return path

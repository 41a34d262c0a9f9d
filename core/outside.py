"""Text written by others, made clean once, where eagle-tui builds it into its own text.

A command line or a process title comes from the process table, where any local user sets
what it holds (``exec -a $'\\e]0;pwned\\a' …``, an ``--api-key`` in argv); a log line is
written by the server. Before such text goes into a flag's evidence, a verdict, a port
holder's description or a process list, it passes through here: credentials replaced by
``<redacted>`` (``core.urls.redact``) and every control or escape character shown, never
run (``core.text.terminal_safe``). So every front end (the dashboard, ``watch`` as text and
JSON, ``status``, ``diagnose``) gets the same clean text and none of them has to remember to.
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Sequence

from eagle_tui.core.text import quote as quoted
from eagle_tui.core.text import terminal_safe
from eagle_tui.core.urls import redact


@functools.lru_cache(maxsize=512)
def clean(text: str) -> str:
    """``text`` (one line) with its credentials redacted and its control characters shown.
    Remembered: a watcher cleans the same last log line and titles every tick."""
    return terminal_safe(redact(text))


def command_line(argv: Sequence[str]) -> str:
    """``argv`` as one clean line, each argument quoted as a shell would need it, so a
    secret of several words (``--api-key 'two words'``) is redacted whole."""
    return clean(shlex.join(argv))


def quote(text: str | None, limit: int = 160) -> str:
    """``core.text.quote`` of ``text`` made clean first (a secret is redacted before the
    clip could cut its name off)."""
    return quoted(None if text is None else clean(text), limit)

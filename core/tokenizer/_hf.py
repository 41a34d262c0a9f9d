"""The one place that imports ``transformers`` (lazily, offline, quietly).

``transformers`` is untyped here and slow to import (about a second), so it is imported only
when a tokenizer is actually loaded, and handled as ``Any`` at this boundary.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any

# Two threads importing transformers at once can see a half-initialised module (the UI
# loads tokenizers in workers); functools.cache would then keep the broken module forever.
_IMPORT_LOCK = threading.Lock()


def transformers_module() -> Any:
    """The ``transformers`` module, imported once under a lock (see ``_import_transformers``)."""
    with _IMPORT_LOCK:
        return _import_transformers()


@functools.cache
def _import_transformers() -> Any:
    """Import ``transformers`` offline, with its log records routed to stdlib ``logging``.

    Hub access is switched off (eagle-tui only reads local directories) unless the
    environment already says otherwise. ``transformers`` normally prints its warnings to
    stderr, which would tear a running TUI; here they propagate to the application's
    logging configuration instead.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    import transformers

    hf_logging = transformers.utils.logging
    hf_logging.disable_default_handler()
    hf_logging.enable_propagation()
    _ = transformers.AutoTokenizer  # resolve the lazy attribute while holding the lock
    return transformers

"""Tokenizers for display, loaded lazily and shared safely between worker threads.

Loading imports ``transformers`` (about two seconds), so it happens in a worker the first
time a view needs decoded text; until then views show raw ids. One fast tokenizer must not
be used from two threads at once ("Already borrowed"), so every use goes through the lock
of ``core.samples.decode.SharedTokenizer``. Which tokenizer a batch is decoded with is
``core.samples.decode.choose_tokenizer``'s rule (``eagle-tui inspect`` uses it too).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from eagle_tui.core.errors import TokenizerError
from eagle_tui.core.samples.decode import SharedTokenizer, TokenizerChoice

if TYPE_CHECKING:
    from eagle_tui.core.tokenizer import LoadedTokenizer

__all__ = ["LOAD_LOCK", "SharedTokenizer", "TokenizerCache", "load_private"]


LOAD_LOCK = threading.Lock()
"""Held while any tokenizer is loaded in this process: two threads importing
``transformers`` at once can leave one of them with a half-initialised module (seen as
``AttributeError: module 'transformers' has no attribute 'AutoTokenizer'``)."""


def load_private(path: Path, *, trust_remote_code: bool = False) -> LoadedTokenizer:
    """A new tokenizer instance for one user (a capture engine); loads are serialised."""
    from eagle_tui.core.tokenizer import load_tokenizer

    with LOAD_LOCK:
        return load_tokenizer(path, trust_remote_code=trust_remote_code)


class TokenizerCache:
    """One ``SharedTokenizer`` per directory; ``preferred`` is the dashboard's
    ``--tokenizer`` (it wins in ``choose_tokenizer``)."""

    def __init__(self, preferred: Path | None = None) -> None:
        self.preferred = preferred
        self._loaded: dict[Path, SharedTokenizer] = {}
        self._lock = threading.Lock()

    def load(self, path: Path) -> SharedTokenizer:
        """The tokenizer in ``path`` (blocking; call from a worker). Raises TokenizerError."""
        key = path.expanduser().resolve()
        with self._lock:
            cached = self._loaded.get(key)
            if cached is None:
                cached = SharedTokenizer(load_private(key))
                self._loaded[key] = cached
            return cached

    def try_choice(self, choice: TokenizerChoice) -> tuple[SharedTokenizer | None, str]:
        """The chosen tokenizer, loaded, or ``(None, why not)``; never raises."""
        if choice.path is None:
            return None, f"{choice.why} (pass --tokenizer DIR)"
        return self.try_load(choice.path)

    def try_load(self, path: Path | None) -> tuple[SharedTokenizer | None, str]:
        """``(tokenizer, "")`` or ``(None, why not)``; never raises."""
        if path is None:
            return None, "no tokenizer known for these shards (pass --tokenizer DIR)"
        try:
            return self.load(path), ""
        except TokenizerError as exc:
            return None, str(exc)
        except Exception as exc:  # transformers can fail in many ways
            return None, f"cannot load tokenizer {path}: {type(exc).__name__}: {exc}"

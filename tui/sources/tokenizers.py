"""Tokenizers for display, loaded lazily and shared safely between worker threads.

Loading imports ``transformers`` (about two seconds), so it happens in a worker the first
time a view needs decoded text; until then views show raw ids. One fast tokenizer must not
be used from two threads at once ("Already borrowed"), so every use goes through a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from eagle_tui.core.errors import TokenizerError

if TYPE_CHECKING:
    from eagle_tui.core.shards.schema import ShardMetadata
    from eagle_tui.core.tokenizer import BoundaryIds, LoadedTokenizer


class SharedTokenizer:
    """A loaded tokenizer whose decode and lookups are serialised by a lock."""

    def __init__(self, tokenizer: LoadedTokenizer) -> None:
        self.tokenizer = tokenizer
        self.name = tokenizer.name
        self._lock = threading.Lock()

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` with special tokens kept (they are part of the data)."""
        with self._lock:
            return self.tokenizer.decode(ids, skip_special_tokens=False)

    def token_text(self, token_id: int) -> str | None:
        """The token whose id is ``token_id``."""
        with self._lock:
            return self.tokenizer.id_to_token(token_id)

    def boundary_ids(self) -> BoundaryIds:
        """Think, end-of-think, stop and tool-call ids of this tokenizer."""
        with self._lock:
            return self.tokenizer.boundary_ids()


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
    """One ``SharedTokenizer`` per directory; ``preferred`` (``--tokenizer``) wins."""

    def __init__(self, preferred: Path | None = None) -> None:
        self.preferred = preferred
        self._loaded: dict[Path, SharedTokenizer] = {}
        self._lock = threading.Lock()

    def choose(self, metadata: ShardMetadata | None) -> Path | None:
        """The directory to decode with: ``--tokenizer``, the shard's recorded tokenizer if it
        still exists, the bundled tokenizer if the shard names it, else None."""
        from eagle_tui.core.tokenizer import BUNDLED_TOKENIZER_NAME, bundled_tokenizer_path

        if self.preferred is not None:
            return self.preferred
        if metadata is None:
            return None
        recorded = Path(metadata.tokenizer.path) if metadata.tokenizer.path else None
        if recorded is not None and recorded.is_dir():
            return recorded
        if metadata.tokenizer.name == BUNDLED_TOKENIZER_NAME:
            return bundled_tokenizer_path()
        return None

    def load(self, path: Path) -> SharedTokenizer:
        """The tokenizer in ``path`` (blocking; call from a worker). Raises TokenizerError."""
        key = path.expanduser().resolve()
        with self._lock:
            cached = self._loaded.get(key)
            if cached is None:
                cached = SharedTokenizer(load_private(key))
                self._loaded[key] = cached
            return cached

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

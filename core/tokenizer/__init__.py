"""The target model's tokenizer: loading, chat-template rendering, boundary ids.

Importing this package is cheap: ``transformers`` is imported only by ``load_tokenizer``.
"""

from eagle_tui.core.tokenizer.boundaries import OVERRIDE_KEYS, BoundaryIds, resolve_boundaries
from eagle_tui.core.tokenizer.loader import (
    BUNDLED_TOKENIZER_NAME,
    LoadedTokenizer,
    bundled_tokenizer_path,
    load_tokenizer,
)

__all__ = [
    "BUNDLED_TOKENIZER_NAME",
    "OVERRIDE_KEYS",
    "BoundaryIds",
    "LoadedTokenizer",
    "bundled_tokenizer_path",
    "load_tokenizer",
    "resolve_boundaries",
]

"""Token documents for samples: a stored row split and decoded as ``core.samples.decode``
says (the rules ``eagle-tui inspect`` uses), or a live sequence. Runs in workers (decoding
is CPU).
"""

from __future__ import annotations

from collections.abc import Sequence

from eagle_tui.core.samples.decode import KIMI_BOUNDARIES, Decoding, SharedTokenizer
from eagle_tui.core.shards.schema import ShardRow
from eagle_tui.core.tokenizer import BoundaryIds
from eagle_tui.tui.render.tokens import TokenDocument, build_document, kimi_token_text

__all__ = ["KIMI_BOUNDARIES", "sample_document", "sequence_document"]


def sequence_document(
    ids: Sequence[int],
    prompt_len: int,
    boundary: BoundaryIds,
    tokenizer: SharedTokenizer | None,
) -> TokenDocument:
    """Segments of ``ids``, decoded when a tokenizer is given."""
    if tokenizer is None:
        return build_document(ids, prompt_len, boundary, token_text=kimi_token_text)
    return build_document(
        ids, prompt_len, boundary, decode=tokenizer.decode, token_text=tokenizer.token_text
    )


def sample_document(row: ShardRow, decoding: Decoding) -> TokenDocument:
    """The document of a stored sample, split and decoded as ``decoding`` says."""
    return sequence_document(row.input_ids, row.prompt_len, decoding.boundaries,
                             decoding.tokenizer)

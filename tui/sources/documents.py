"""Token documents for samples: the boundary ids to split by, and the decode to use.

Boundary ids come from the shard's footer (the ids used at capture), else from the loaded
tokenizer, else Kimi's defaults. Runs in workers (decoding is CPU).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eagle_tui.core import kimi
from eagle_tui.core.shards.schema import ShardMetadata, ShardRow
from eagle_tui.core.tokenizer import BoundaryIds
from eagle_tui.tui.render.tokens import TokenDocument, build_document, kimi_token_text
from eagle_tui.tui.sources.tokenizers import SharedTokenizer

KIMI_BOUNDARIES = BoundaryIds(
    think=kimi.THINK,
    think_end=kimi.THINK_END,
    stop=(kimi.IM_END,),
    tool_call=kimi.TOOL_CALL_IDS,
)


def boundaries_from_metadata(metadata: ShardMetadata | None) -> BoundaryIds:
    """The boundary ids recorded in a shard footer (Kimi's when absent or malformed)."""
    recorded: Mapping[str, Any] = metadata.boundary_ids if metadata is not None else {}
    try:
        return BoundaryIds(
            think=_optional_int(recorded.get("think", kimi.THINK)),
            think_end=_optional_int(recorded.get("think_end", kimi.THINK_END)),
            stop=tuple(int(i) for i in recorded.get("stop", (kimi.IM_END,))),
            tool_call=frozenset(int(i) for i in recorded.get("tool_call", kimi.TOOL_CALL_IDS)),
        )
    except (TypeError, ValueError):
        return KIMI_BOUNDARIES


def _optional_int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


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


def sample_document(
    row: ShardRow, metadata: ShardMetadata | None, tokenizer: SharedTokenizer | None
) -> TokenDocument:
    """The document of a stored sample: boundaries as recorded at capture when the footer
    has them, else the tokenizer's, else Kimi's."""
    if (metadata is None or not metadata.boundary_ids) and tokenizer is not None:
        boundary = tokenizer.boundary_ids()
    else:
        boundary = boundaries_from_metadata(metadata)
    return sequence_document(row.input_ids, row.prompt_len, boundary, tokenizer)

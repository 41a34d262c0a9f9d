"""How stored rows are decoded: one tokenizer rule and one boundary rule, for ``inspect``
and the Inspect view alike (see docs/shard-format.md, "Decoding a row").

Which tokenizer (:func:`choose_tokenizer`), the first that applies:

1. the one the user named (``inspect --tokenizer``, the dashboard's ``--tokenizer``);
2. the batch's recorded tokenizer, where it is now: the manifest's ``config.tokenizer_path``
   (a resume from a moved tokenizer directory records the new place) and then the shard
   footer's ``eagle_tui.tokenizer.path``, the first that is a directory here;
3. the bundled tokenizer, when the footer names it (shards captured with it elsewhere);
4. none: the caller shows raw ids (the view) or says what to pass (``inspect``).

A loaded tokenizer whose fingerprint differs from one the batch recorded is used, with a
warning (the text may be wrong).

Which boundary ids split a row (:func:`boundaries_for`): the record of the shard holding
the row (``eagle_tui.boundary_ids``: the ids validation used), completed key by key from
the manifest's ``config.extra.boundary_ids``; a key neither has (a footer written by
another tool, or edited: eagle-tui writes all four) or that does not hold ids comes from the
decoding tokenizer's own resolution by token name, and without a tokenizer (raw ids) from
Kimi-K2.5's ids. A recorded ``null`` stays None (the tokenizer has no such token).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle_tui.core import kimi
from eagle_tui.core.segments import Segment, split_segments
from eagle_tui.core.tokenizer import BUNDLED_TOKENIZER_NAME, BoundaryIds, bundled_tokenizer_path

if TYPE_CHECKING:  # the dashboard imports this module at start: no parquet before it is needed
    from eagle_tui.core.shards.manifest import Manifest
    from eagle_tui.core.shards.schema import ShardMetadata, ShardRow
    from eagle_tui.core.tokenizer.light import DecodingTokenizer

KIMI_BOUNDARIES = BoundaryIds(
    think=kimi.THINK,
    think_end=kimi.THINK_END,
    stop=(kimi.IM_END,),
    tool_call=kimi.TOOL_CALL_IDS,
)
"""Kimi-K2.5's boundary ids: the fallback when nothing else says (raw ids, live streams)."""


@dataclass(frozen=True, slots=True)
class TokenizerChoice:
    """The directory to decode with and where that came from (``--tokenizer``,
    ``manifest``, ``footer``, ``bundled``); ``path`` None says ``why`` not."""

    path: Path | None
    source: str = ""
    why: str = ""


def choose_tokenizer(override: Path | None, manifest: Manifest | None,
                     footer: ShardMetadata | None) -> TokenizerChoice:
    """The tokenizer to decode a batch with (see the module docstring)."""
    if override is not None:
        return TokenizerChoice(override, "--tokenizer")
    recorded = [(source, path) for source, path in (
        ("manifest", manifest.config.tokenizer_path if manifest else ""),
        ("footer", footer.tokenizer.path if footer else ""),
    ) if path]
    for source, path in recorded:
        if Path(path).is_dir():
            return TokenizerChoice(Path(path), source)
    if footer is not None and footer.tokenizer.name == BUNDLED_TOKENIZER_NAME:
        return TokenizerChoice(bundled_tokenizer_path(), "bundled")
    if recorded:
        return TokenizerChoice(None, why=f"the tokenizer these shards were captured with "
                               f"({recorded[0][1]}) is not on this machine")
    return TokenizerChoice(None, why="these shards name no tokenizer")


class SharedTokenizer:
    """A loaded tokenizer as rows are decoded with it (special tokens kept: they are part
    of the data); calls are serialised by a lock, since one fast tokenizer must not be used
    from two threads at once ("Already borrowed")."""

    def __init__(self, tokenizer: DecodingTokenizer) -> None:
        self.tokenizer = tokenizer
        self.name = tokenizer.name
        self._lock = threading.Lock()

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` with special tokens kept."""
        with self._lock:
            return self.tokenizer.decode(ids, skip_special_tokens=False)

    def token_text(self, token_id: int) -> str | None:
        """The token whose id is ``token_id``."""
        with self._lock:
            return self.tokenizer.id_to_token(token_id)

    def boundary_ids(self) -> BoundaryIds:
        """Think, end-of-think, stop and tool-call ids of this tokenizer, by token name."""
        with self._lock:
            return self.tokenizer.boundary_ids()

    def fingerprint(self) -> str:
        """sha256 over the vocabulary and special tokens (as recorded at capture)."""
        with self._lock:
            return self.tokenizer.fingerprint()


def recorded_fingerprints(manifest: Manifest | None,
                          footer: ShardMetadata | None) -> frozenset[str]:
    """The tokenizer fingerprints the batch recorded (its manifest, its first shard)."""
    return frozenset(fp for fp in (manifest.config.tokenizer_fingerprint if manifest else "",
                                   footer.tokenizer.fingerprint if footer else "") if fp)


def fingerprint_warning(tokenizer: SharedTokenizer, manifest: Manifest | None,
                        footer: ShardMetadata | None) -> str:
    """A warning when ``tokenizer`` is not the one the batch recorded (in its manifest or
    its first shard's footer), else ""."""
    if recorded_fingerprints(manifest, footer) - {tokenizer.fingerprint()}:
        return (f"tokenizer {tokenizer.tokenizer.path} differs from the one the shards were "
                "captured with (fingerprint); text may be wrong")
    return ""


def boundaries_for(footer: ShardMetadata | None, manifest: Manifest | None,
                   tokenizer: SharedTokenizer | None) -> BoundaryIds:
    """The boundary ids to split a row with (see the module docstring)."""
    recorded: dict[str, Any] = dict(manifest.config.extra.boundary_ids) if manifest else {}
    recorded.update(footer.boundary_ids if footer else {})
    fallback = tokenizer.boundary_ids() if tokenizer is not None else KIMI_BOUNDARIES
    return BoundaryIds(
        think=_one_id(recorded, "think", fallback.think),
        think_end=_one_id(recorded, "think_end", fallback.think_end),
        stop=tuple(_ids(recorded, "stop", fallback.stop)),
        tool_call=frozenset(_ids(recorded, "tool_call", fallback.tool_call)),
    )


@dataclass(frozen=True, slots=True)
class Decoding:
    """How one row is shown: the boundary ids that split it and the tokenizer that decodes
    it (None: raw ids)."""

    boundaries: BoundaryIds
    tokenizer: SharedTokenizer | None = None

    def segments(self, row: ShardRow) -> list[Segment]:
        """The row's typed segments (prompt, reasoning, markers, answer, …)."""
        return split_segments(row.input_ids, row.prompt_len, self.boundaries)


def decoding_for(footer: ShardMetadata | None, manifest: Manifest | None,
                 tokenizer: SharedTokenizer | None) -> Decoding:
    """The decoding of a row whose shard footer is ``footer``."""
    return Decoding(boundaries_for(footer, manifest, tokenizer), tokenizer)


def _one_id(recorded: Mapping[str, Any], key: str, fallback: int | None) -> int | None:
    if key not in recorded:
        return fallback
    value = recorded[key]
    if value is None:
        return None
    return value if _is_id(value) else fallback


def _ids(recorded: Mapping[str, Any], key: str, fallback: Sequence[int] | frozenset[int],
         ) -> list[int]:
    value = recorded.get(key)
    if isinstance(value, list) and all(_is_id(v) for v in value):
        return list(value)
    return sorted(fallback) if isinstance(fallback, frozenset) else list(fallback)


def _is_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0

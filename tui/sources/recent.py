"""Samples of a running batch that has written no shard yet, straight from its worker.

A batch writes its first shard after ``shard_rows`` samples (2,000 by default) or
``shard_max_age_s``; until then its worker keeps the newest finished rows for
``GET /recent`` (``core.batches``). ``RecentSource`` offers them to the Inspect view with
the calls ``SampleSource`` has (summary, select, page, sample, tokenizer_choice, decoding),
from memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from eagle_tui.core.samples.decode import (
    Decoding,
    SharedTokenizer,
    TokenizerChoice,
    choose_tokenizer,
    decoding_for,
)
from eagle_tui.core.samples.select import ANY, CLEAN, FLAGGED, SampleFilter
from eagle_tui.core.shards.schema import ShardRow
from eagle_tui.tui.sources.samples import PAGE_SIZE, SamplePage, SampleRow, ShardSummary


def keeps(row: ShardRow, wanted: SampleFilter) -> bool:
    """True when ``wanted`` lists ``row``."""
    if wanted.finish != ANY and row.finish_reason != wanted.finish:
        return False
    if wanted.conversation is not None and row.conversation_id != wanted.conversation:
        return False
    if wanted.flag == CLEAN:
        return not row.flags
    if wanted.flag == FLAGGED:
        return bool(row.flags)
    return wanted.flag == ANY or wanted.flag in row.flags


class RecentSource:
    """The recent rows of a running batch, paged and filtered like shards."""

    def __init__(
        self, path: Path, rows: Sequence[ShardRow], batch_id: str, tokenizer: Path | None
    ) -> None:
        self.path = path
        self.batch_id = batch_id
        self.tokenizer = tokenizer
        """The batch's tokenizer (no shard footer names one yet)."""
        self._rows = list(rows)
        self._filter = SampleFilter()
        self._selected = list(range(len(self._rows)))

    @property
    def rows(self) -> int:
        return len(self._rows)

    def summary(self) -> ShardSummary:
        flags: Counter[str] = Counter(f for row in self._rows for f in row.flags)
        finishes = Counter(row.finish_reason for row in self._rows)
        clean = sum(1 for row in self._rows if not row.flags)
        return ShardSummary(self.path, len(self._rows), 0, (), dict(flags), dict(finishes),
                            clean, None, None)

    def select(self, wanted: SampleFilter) -> int:
        self._filter = wanted
        self._selected = [i for i, row in enumerate(self._rows) if keeps(row, wanted)]
        if wanted.conversation is not None:
            self._selected.sort(key=lambda i: self._rows[i].turn or 0)
        return len(self._selected)

    def page(self, number: int, size: int = PAGE_SIZE) -> SamplePage:
        matching = len(self._selected)
        pages = max(1, -(-matching // size))
        number = max(0, min(number, pages - 1))
        rows = tuple(self._table_row(i) for i in self._selected[number * size:(number + 1) * size])
        return SamplePage(rows, number, pages, matching, self._filter)

    def find(self, text: str) -> int | None:
        """The recent row ``text`` names: a row number, a sample id or part of one."""
        wanted = text.strip().removeprefix("#")
        if wanted.isdigit():
            return int(wanted) if int(wanted) < len(self._rows) else None
        ids = [row.sample_id for row in self._rows]
        if wanted in ids:
            return ids.index(wanted)
        return next((i for i, sample_id in enumerate(ids)
                     if wanted.lower() in sample_id.lower()), None)

    def position(self, index: int) -> int | None:
        """Where row ``index`` sits in the current selection (None: filtered out)."""
        return self._selected.index(index) if index in self._selected else None

    def sample(self, index: int) -> ShardRow:
        return self._rows[index]

    def tokenizer_choice(self, preferred: Path | None) -> TokenizerChoice:
        """The running batch's own tokenizer (no shard footer names one yet)."""
        if self.tokenizer is not None:
            return TokenizerChoice(self.tokenizer, "batch")
        return choose_tokenizer(preferred, None, None)

    def decoding(self, index: int, tokenizer: SharedTokenizer | None) -> Decoding:
        """No footer records boundary ids yet: the tokenizer's own, else Kimi's."""
        return decoding_for(None, None, tokenizer)

    def warning(self, tokenizer: SharedTokenizer) -> str:
        """Nothing recorded to compare with."""
        return ""

    def close(self) -> None:
        """Nothing to release (rows are in memory)."""

    def _table_row(self, index: int) -> SampleRow:
        row = self._rows[index]
        return SampleRow(index, row.sample_id, row.prompt_len,
                         len(row.input_ids) - row.prompt_len, row.finish_reason,
                         tuple(row.flags), row.conversation_id)

"""Batch statistics over shards: rows per flag and finish reason, length percentiles.

Computed one row group at a time with pyarrow kernels (no Python loop per row); only the
columns needed are read (``input_ids`` for its lengths only).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from eagle_tui.core.shards.conversations import (
    ConversationCounter,
    ConversationStats,
    is_multi_turn,
)
from eagle_tui.core.shards.reader import ShardReader

PERCENTILES = (0.5, 0.9, 0.99)
STATS_COLUMNS = ["flags", "finish_reason", "prompt_len", "think_end", "latency_s", "input_ids",
                 "sample_id"]  # sample_id: export's held-out split is counted as it drops it


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary of one numeric column: count, mean, p50/p90/p99 (nearest rank) and max."""

    count: int
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None

    @classmethod
    def of(cls, chunks: Iterable[pa.Array]) -> Distribution:
        """The summary of the concatenated ``chunks`` (all None when empty)."""
        values = pa.chunked_array([c.cast(pa.float64()) for c in chunks], type=pa.float64())
        if len(values) == 0:
            return cls(0, None, None, None, None, None)
        quantiles = pc.quantile(values, q=list(PERCENTILES), interpolation="nearest")
        p50, p90, p99 = (float(q) for q in quantiles.to_pylist())
        return cls(len(values), pc.mean(values).as_py(), p50, p90, p99, pc.max(values).as_py())


@dataclass(frozen=True, slots=True)
class BatchStats:
    """Everything ``eagle-tui stats`` prints."""

    rows: int
    shards: int
    clean: int
    flags: dict[str, int]
    finish_reasons: dict[str, int]
    prompt_tokens: Distribution
    output_tokens: Distribution
    reasoning_tokens: Distribution
    latency_s: Distribution
    ignored: list[str] = field(default_factory=list)
    manifest_counts: dict[str, int] | None = None
    conversations: ConversationStats | None = None  # multi-turn batches only


class _Accumulator:
    """Running tallies across row groups."""

    def __init__(self) -> None:
        self.flags: Counter[str] = Counter()
        self.finish: Counter[str] = Counter()
        self.clean = 0
        self.prompt: list[pa.Array] = []
        self.output: list[pa.Array] = []
        self.reasoning: list[pa.Array] = []
        self.latency: list[pa.Array] = []

    def add(self, table: pa.Table) -> None:
        """Fold one row group in."""
        flags = table.column("flags").combine_chunks()
        self.flags.update(_value_counts(pc.list_flatten(flags)))
        self.clean += pc.sum(pc.equal(pc.list_value_length(flags), 0)).as_py() or 0
        self.finish.update(_value_counts(table.column("finish_reason").combine_chunks()))
        prompt = table.column("prompt_len").combine_chunks().cast(pa.int64())
        total = pc.list_value_length(table.column("input_ids").combine_chunks()).cast(pa.int64())
        think_end = table.column("think_end").combine_chunks().cast(pa.int64())
        self.prompt.append(prompt)
        self.output.append(pc.subtract(total, prompt))
        has_end = pc.greater_equal(think_end, 0)
        self.reasoning.append(pc.filter(pc.subtract(think_end, prompt), has_end))
        self.latency.append(table.column("latency_s").combine_chunks())


def compute_stats(
    reader: ShardReader, observers: Sequence[Callable[[pa.Table], None]] = ()
) -> BatchStats:
    """Statistics over every row ``reader`` sees (reasoning length counts rows with a
    think_end only: ``think_end - prompt_len`` generated ids before it).

    Each of ``observers`` also sees every row group (:data:`STATS_COLUMNS`), so a caller
    can count more in the same single read (the ``stats`` verb's export preview does).
    """
    return compute_stats_over([reader], observers)


def compute_stats_over(
    readers: Sequence[ShardReader], observers: Sequence[Callable[[pa.Table], None]] = ()
) -> BatchStats:
    """:func:`compute_stats` over several batches as one (``--shard`` slices of a job); the
    manifest counts are summed when every batch has a manifest."""
    acc = _Accumulator()
    turns = ConversationCounter() if any(is_multi_turn(r) for r in readers) else None
    columns = STATS_COLUMNS + (["conversation_id", "turn"] if turns is not None else [])
    for reader in readers:
        for table in reader.iter_batches(columns if is_multi_turn(reader) else STATS_COLUMNS):
            acc.add(table)
            if turns is not None and is_multi_turn(reader):
                turns.add(table)
            for observe in observers:
                observe(table)
    return BatchStats(
        rows=sum(r.num_rows for r in readers),
        shards=sum(len(r.shards) for r in readers),
        clean=acc.clean,
        flags=dict(acc.flags.most_common()),
        finish_reasons=dict(acc.finish.most_common()),
        prompt_tokens=Distribution.of(acc.prompt),
        output_tokens=Distribution.of(acc.output),
        reasoning_tokens=Distribution.of(acc.reasoning),
        latency_s=Distribution.of(acc.latency),
        ignored=[str(f) for r in readers for f in r.ignored],
        manifest_counts=_summed_counts(readers),
        conversations=turns.result() if turns is not None else None,
    )


def _summed_counts(readers: Sequence[ShardReader]) -> dict[str, int] | None:
    manifests = [r.manifest for r in readers]
    if not manifests or any(m is None for m in manifests):
        return None
    total: Counter[str] = Counter()
    for manifest in manifests:
        assert manifest is not None
        total.update(msgspec.structs.asdict(manifest.counts))
    return dict(total)


def _value_counts(values: pa.Array) -> dict[str, int]:
    """Occurrences of each distinct value."""
    counts = pc.value_counts(values)
    return {
        str(item["values"]): int(item["counts"])
        for item in counts.to_pylist()
        if item["values"] is not None
    }

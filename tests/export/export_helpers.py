"""Batches for the export tests, written with the project's own ShardWriter.

Rows carry Kimi-shaped ids (the prompt ends with ``<think>``, outputs close reasoning with
``</think>``) and a mix of flags and finish reasons, so every filter has rows to act on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from eagle_tui.core import kimi
from eagle_tui.core.sampling import SamplingIdentity, SamplingPreset
from eagle_tui.core.shards.manifest import BatchConfig, Manifest
from eagle_tui.core.shards.schema import FooterServer, FooterTokenizer, ShardMetadata, ShardRow
from eagle_tui.core.shards.writer import ShardWriter

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
FINGERPRINT = "ab" * 32


def config(fingerprint: str = FINGERPRINT) -> BatchConfig:
    return BatchConfig("/data/prompts.jsonl", "00" * 32, "/models/kimi", fingerprint,
                       "ef" * 32, SamplingIdentity(64, (SamplingPreset(),)))


def metadata(fingerprint: str = FINGERPRINT, schema_version: int = 1) -> ShardMetadata:
    return ShardMetadata(
        tokenizer=FooterTokenizer(name="kimi-k2.5-tiny", path="/models/kimi",
                                  fingerprint=fingerprint, vocab_size=kimi.VOCAB_SIZE),
        template_hash="ef" * 32, sampling={"max_new_tokens": 64},
        server=FooterServer(version="0.5.23"),
        boundary_ids={"think": kimi.THINK, "think_end": kimi.THINK_END},
        schema_version=schema_version)


# (flags, finish) cycled over rows: clean, informational, and every default-dropped flag
KINDS: tuple[tuple[tuple[str, ...], str], ...] = (
    ((), "stop"),
    (("tool_call",), "stop"),
    (("no_think_end", "truncated"), "length"),
    (("aborted",), "abort"),
    ((), "stop"),
    (("count_mismatch",), "stop"),
    (("prompt_count_mismatch",), "stop"),
    (("bad_token_id",), "stop"),
    (("no_stop_token",), "stop"),
    ((), "length"),
)


def make_row(i: int, prefix: str = "s") -> ShardRow:
    """Row ``i``: prompt and output lengths vary with ``i``; ids near both int32 ends of the
    vocabulary and Kimi's special ids, so nothing survives a lossy path by luck."""
    flags, finish = KINDS[i % len(KINDS)]
    prompt = [kimi.IM_USER, *(((i * 7919 + k * 104729) % 163000) for k in range(3 + i % 11)),
              kimi.IM_END, kimi.IM_ASSISTANT, kimi.THINK]
    body = [(i * 31 + k * 65537) % kimi.VOCAB_SIZE for k in range(1 + (i * 13) % 40)]
    output = [0, *body, kimi.THINK_END, kimi.VOCAB_SIZE - 1, kimi.IM_END]
    if finish == "abort":
        output = output[: i % 3]
    ids = prompt + output
    think_end = len(prompt) + output.index(kimi.THINK_END) if kimi.THINK_END in output else -1
    return ShardRow(
        sample_id=f"{prefix}{i:05d}", input_ids=ids, prompt_len=len(prompt),
        finish_reason=finish, matched_stop=kimi.IM_END if finish == "stop" else None,
        think_end=think_end, flags=list(flags), endpoint="http://gpu-1:30000",
        rid=f"rid-{prefix}{i}", latency_s=0.5 + i % 4, created_at=T0 + timedelta(seconds=i),
    )


def make_turn_row(i: int, turns: int = 3) -> ShardRow:
    """Row ``i`` of a multi-turn batch: turn ``i % turns`` of conversation ``c{i // turns}``,
    its parent the conversation's previous turn."""
    conversation, turn = f"c{i // turns:04d}", i % turns
    return replace(make_row(i), sample_id=f"{conversation}#turn{turn}",
                   conversation_id=conversation, turn=turn,
                   parent_id=f"{conversation}#turn{turn - 1}" if turn else None)


def write_batch(directory: Path, rows: Sequence[ShardRow], *, fingerprint: str = FINGERPRINT,
                max_rows: int = 40, row_group_rows: int = 7, schema_version: int = 1,
                acceptance_column: bool = False) -> Path:
    """A batch directory (manifest + shards) holding ``rows``, several shards and groups
    (with the acceptance column when ``acceptance_column``, as a fresh capture writes)."""
    manifest = Manifest(directory, config(fingerprint), schema_version=schema_version,
                        acceptance_column=acceptance_column)
    manifest.save_atomic()
    with ShardWriter(directory, metadata=metadata(fingerprint, schema_version),
                     manifest=manifest, max_rows=max_rows,
                     row_group_rows=row_group_rows) as writer:
        for row in rows:
            writer.add(row)
    return directory


def shard_rows(directory: Path) -> list[dict[str, Any]]:
    """Every row of a batch, read straight from its shard files in manifest order."""
    manifest = Manifest.load(directory)
    rows: list[dict[str, Any]] = []
    for info in manifest.shards:
        rows.extend(pq.read_table(directory / "shards" / info.name).to_pylist())
    return rows


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def expected_mask(row: dict[str, Any], offset: int) -> list[int]:
    start = max(row["prompt_len"] - offset, 0)
    return [0] * start + [1] * (len(row["input_ids"]) - start)

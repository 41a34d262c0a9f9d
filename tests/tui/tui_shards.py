"""Writes small shard directories for the TUI tests (real parquet, real schema)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq

from eagle_tui.core import kimi
from eagle_tui.core.shards.schema import (
    FooterServer,
    FooterTokenizer,
    ShardMetadata,
    ShardRow,
    rows_to_table,
)

TRICKY_TEXTS = ("[INST] hello [/INST]", "a [/] b", "[bold not bold", "list[int] = [1, 2]")
WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
BOUNDARIES = {
    "think": kimi.THINK,
    "think_end": kimi.THINK_END,
    "stop": [kimi.IM_END],
    "tool_call": sorted(kimi.TOOL_CALL_IDS),
}


def metadata(tokenizer_name: str = "kimi-k2.5-tiny", tokenizer_path: str = "",
             schema_version: int = 1) -> ShardMetadata:
    """Footer metadata naming the bundled tokenizer."""
    return ShardMetadata(
        tokenizer=FooterTokenizer(name=tokenizer_name, path=tokenizer_path, fingerprint="test"),
        template_hash="test",
        sampling={"temperature": 0.0},
        server=FooterServer(model_path="sim", version="0.5.23"),
        boundary_ids=BOUNDARIES,
        schema_version=schema_version,
    )


def make_row(
    index: int,
    prompt: list[int],
    output: list[int],
    flags: tuple[str, ...] = (),
    finish: str = "stop",
) -> ShardRow:
    """One row with the given ids."""
    ids = prompt + output
    think_end = ids.index(kimi.THINK_END, len(prompt)) if kimi.THINK_END in output else -1
    return ShardRow(
        sample_id=f"s{index:05d}",
        input_ids=ids,
        prompt_len=len(prompt),
        finish_reason=finish,
        matched_stop=kimi.IM_END if finish == "stop" else None,
        think_end=think_end,
        flags=list(flags),
        endpoint="http://127.0.0.1:30000",
        rid=f"r{index}",
        latency_s=1.5,
        created_at=WHEN,
    )


def synthetic_rows(count: int) -> list[ShardRow]:
    """Rows with a varied mix of flags and finish reasons (ids need no tokenizer)."""
    rows = []
    for i in range(count):
        prompt = [kimi.IM_USER, 100 + i % 50, 200, kimi.IM_END, kimi.IM_ASSISTANT, kimi.THINK]
        output = [300 + i % 7, 301, kimi.THINK_END, 400, 401, kimi.IM_END]
        flags: tuple[str, ...] = ()
        finish = "stop"
        if i % 5 == 1:
            output = [
                *output[:-1],
                kimi.TOOL_CALLS_SECTION_BEGIN,
                500,
                kimi.TOOL_CALLS_SECTION_END,
                kimi.IM_END,
            ]
            flags = ("tool_call",)
        if i % 7 == 3:
            output, flags, finish = output[:2], ("no_think_end", "truncated"), "length"
        rows.append(make_row(i, prompt, output, flags, finish))
    return rows


def write_shards(
    directory: Path,
    rows: list[ShardRow],
    *,
    per_file: int = 100,
    row_group: int = 25,
    meta: ShardMetadata | None = None,
) -> Path:
    """``directory/shards/part-NNNNN.parquet`` files holding ``rows``; returns directory.
    The shard schema is the one ``meta`` names (2 for multi-turn rows)."""
    shards = directory / "shards"
    shards.mkdir(parents=True, exist_ok=True)
    meta = meta or metadata()
    footer = meta.to_parquet()
    for number, start in enumerate(range(0, len(rows), per_file)):
        table = rows_to_table(rows[start : start + per_file], meta.schema_version)
        table = table.replace_schema_metadata(footer)
        pq.write_table(
            table,
            shards / f"part-{number:05d}.parquet",
            row_group_size=row_group,
            compression="zstd",
        )
    return directory

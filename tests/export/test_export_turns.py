"""Multi-turn batches (shard schema 2) export their turn columns: parquet carries
``conversation_id``, ``turn`` and ``parent_id`` (null for the rows of a single-turn batch
exported alongside), speculators' metadata names them; single-turn exports are unchanged."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from export_helpers import (
    expected_mask,
    make_row,
    make_turn_row,
    read_jsonl,
    shard_rows,
    write_batch,
)

from eagle_tui.core.export.options import ExportOptions, RowFilter
from eagle_tui.core.export.run import export
from eagle_tui.core.shards.schema import TURN_COLUMNS

TURNS = ("conversation_id", "turn", "parent_id")


@pytest.fixture(scope="module")
def turn_batch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("turns") / "batch"
    return write_batch(directory, [make_turn_row(i) for i in range(60)], schema_version=2)


@pytest.fixture(scope="module")
def single_batch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("single") / "batch"
    return write_batch(directory, [make_row(i, prefix="x") for i in range(20)])


def kept(directory: Path) -> list[dict[str, object]]:
    keep = RowFilter()
    return [r for r in shard_rows(directory) if keep.reason(r["flags"], r["finish_reason"]) is None]


def test_parquet_of_a_multi_turn_batch_keeps_its_turn_columns(
        turn_batch: Path, tmp_path: Path) -> None:
    assert TURN_COLUMNS == TURNS
    out = tmp_path / "train.parquet"
    export([turn_batch], out, ExportOptions("parquet", "prompt"))
    exported = pq.read_table(out).to_pylist()
    source = kept(turn_batch)
    assert len(exported) == len(source) > 0
    for row, shard_row in zip(exported, source, strict=True):
        assert {k: v for k, v in row.items() if k != "loss_mask"} == shard_row
        assert row["loss_mask"] == expected_mask(shard_row, 0)
    assert {r["turn"] for r in exported} == {0, 1, 2}
    assert all((r["parent_id"] is None) == (r["turn"] == 0) for r in exported)


def test_single_turn_rows_exported_alongside_have_null_turns(
        turn_batch: Path, single_batch: Path, tmp_path: Path) -> None:
    out = tmp_path / "mixed.parquet"
    export([single_batch, turn_batch], out, ExportOptions("parquet", "prompt"))
    table = pq.read_table(out)
    assert all(table.schema.field(name).nullable for name in TURNS)
    rows = table.to_pylist()
    single = [r for r in rows if r["sample_id"].startswith("x")]
    assert len(single) == len(kept(single_batch))
    assert all(r[name] is None for r in single for name in TURNS)
    assert sum(r["conversation_id"] is not None for r in rows) == len(kept(turn_batch))


def test_single_turn_parquet_export_has_no_turn_columns(
        single_batch: Path, tmp_path: Path) -> None:
    out = tmp_path / "single.parquet"
    export([single_batch], out, ExportOptions("parquet", "prompt"))
    assert not set(TURNS) & set(pq.read_schema(out).names)


def test_speculators_metadata_names_conversation_turn_and_parent(
        turn_batch: Path, single_batch: Path, tmp_path: Path) -> None:
    out = tmp_path / "train.jsonl"
    export([single_batch, turn_batch], out, ExportOptions("speculators", None))
    rows = {r["id"]: r["metadata"] for r in read_jsonl(out)}
    for shard_row in kept(turn_batch):
        meta = rows[str(shard_row["sample_id"])]
        assert {name: meta[name] for name in TURNS} == {name: shard_row[name] for name in TURNS}
    assert not any(name in rows["x00000"] for name in TURNS)

"""The shards' acceptance column never reaches the trainers' JSONL: those files are the bytes
they were before the column existed (the JSONL is the golden file of test_export_golden.py's
two-batch case). Parquet promises every shard column plus ``loss_mask``, so it carries the
column (issue 39 item 20): row for row the shards' values, null for the rows of a batch
without it, and otherwise the file the same rows stored without the column give."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pyarrow.parquet as pq
from export_helpers import make_row, make_turn_row, shard_rows, write_batch

from eagle_tui.core.export.options import DEFAULT_DROP_FLAGS, ExportOptions, RowFilter
from eagle_tui.core.export.output import EXPORT_SCHEMA, EXPORT_SCHEMA_TURNS
from eagle_tui.core.export.run import export
from eagle_tui.core.shards.schema import ACCEPTANCE_FIELD, ShardRow

KEEP_ALL = RowFilter.build(keep_flags=DEFAULT_DROP_FLAGS)
# test_export_golden.py's ["a", "b"] speculators case: a1c00fb's file, 142 rows
GOLDEN_SHA256 = "182e28003403bdda448af7452200e58de4be91e6551b5b4857f79b3d1068b14e"


def speculated(row: ShardRow, i: int) -> ShardRow:
    """``row`` as a speculating server answered it (every third row had no verify step)."""
    if i % 3 == 2:
        return row
    return replace(row, acceptance={"completion_tokens": 9 + i, "verify_steps": 3,
                                    "correct_drafts": 4, "proposed_drafts": 9,
                                    "histogram": [1, 0, 2][: 1 + i % 3]})


def batches(root: Path, acceptance_column: bool) -> list[Path]:
    """test_export_golden.py's batches "a" (single-turn) and "b" (multi-turn)."""
    a = [speculated(make_row(i), i) for i in range(97)]
    b = [speculated(make_turn_row(i), i) for i in range(45)]
    return [write_batch(root / "a", a, acceptance_column=acceptance_column),
            write_batch(root / "b", b, schema_version=2, acceptance_column=acceptance_column)]


def test_the_jsonl_export_is_the_golden_file(tmp_path: Path) -> None:
    sources = batches(tmp_path, acceptance_column=True)
    assert "acceptance" in pq.read_schema(next((sources[0] / "shards").iterdir())).names
    out = tmp_path / "train.jsonl"
    export(sources, out, ExportOptions("speculators", filter=KEEP_ALL))
    assert hashlib.sha256(out.read_bytes()).hexdigest() == GOLDEN_SHA256


def test_the_specforge_export_does_not_gain_the_column(tmp_path: Path) -> None:
    files = []
    for column in (False, True):
        out = tmp_path / f"out-{column}" / "train.jsonl"
        out.parent.mkdir()
        export(batches(tmp_path / f"in-{column}", column), out,
               ExportOptions("specforge", filter=KEEP_ALL))
        files.append(out.read_bytes())
    assert files[0] == files[1]


def _parquet(tmp_path: Path, name: str, sources: list[Path]) -> pa.Table:
    out = tmp_path / name / "train.parquet"
    out.parent.mkdir()
    export(sources, out, ExportOptions("parquet", filter=KEEP_ALL))
    return pq.read_table(out)


def test_the_parquet_export_carries_the_column_row_for_row(tmp_path: Path) -> None:
    without = _parquet(tmp_path, "without", batches(tmp_path / "in-without", False))
    sources = batches(tmp_path / "in-with", True)
    carried = _parquet(tmp_path, "with", sources)
    names = list(EXPORT_SCHEMA_TURNS.names)
    assert carried.schema.names == [*names[:-1], "acceptance", "loss_mask"]
    assert carried.schema.field("acceptance") == ACCEPTANCE_FIELD
    assert carried.drop_columns(["acceptance"]).equals(without)  # the rest as before
    stored = [row["acceptance"] for source in sources for row in shard_rows(source)]
    assert carried.column("acceptance").to_pylist() == stored
    assert stored.count(None) == 47 and len(stored) == 142  # every third row: none


def test_rows_of_a_batch_without_the_column_have_it_null(tmp_path: Path) -> None:
    a = [speculated(make_row(i), i) for i in range(20)]
    b = [speculated(make_row(i, prefix="old"), i) for i in range(10)]
    sources = [write_batch(tmp_path / "a", a, acceptance_column=True),
               write_batch(tmp_path / "b", b)]  # begun before the column existed
    table = _parquet(tmp_path, "mixed", sources)
    values = table.column("acceptance").to_pylist()
    assert values[:20] == [row["acceptance"] for row in shard_rows(sources[0])]
    assert values[20:] == [None] * 10
    only_old = _parquet(tmp_path, "old", [sources[1]])
    assert only_old.schema.names == EXPORT_SCHEMA.names  # no batch has it: no column


def test_hugging_face_datasets_reads_the_column(tmp_path: Path,
                                                hf_datasets: ModuleType) -> None:
    sources = batches(tmp_path / "in", True)
    out = tmp_path / "train.parquet"
    export(sources, out, ExportOptions("parquet", filter=KEEP_ALL))
    loaded = hf_datasets.load_dataset("parquet", data_files=str(out), split="train",
                                      cache_dir=str(tmp_path / "hf-cache"))
    assert loaded.num_rows == 142
    assert loaded["acceptance"] == [row["acceptance"] for source in sources
                                    for row in shard_rows(source)]
    assert len(loaded[0]["input_ids"]) == len(loaded[0]["loss_mask"])

"""The shards' acceptance column never reaches an export: the trainers' files are the bytes
they were before the column existed (the JSONL is the golden file of
test_export_golden.py's two-batch case; the parquet equals the export of the same rows
stored without the column)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from export_helpers import make_row, make_turn_row, write_batch

from eagle_tui.core.export.options import (
    DEFAULT_DROP_FLAGS,
    ExportFormat,
    ExportOptions,
    RowFilter,
)
from eagle_tui.core.export.output import EXPORT_SCHEMA_TURNS
from eagle_tui.core.export.run import export
from eagle_tui.core.shards.schema import ShardRow

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


@pytest.mark.parametrize(("fmt", "name"), [("parquet", "train.parquet"),
                                           ("specforge", "train.jsonl")])
def test_an_export_does_not_gain_the_column(tmp_path: Path, fmt: ExportFormat,
                                            name: str) -> None:
    files = []
    for column in (False, True):
        out = tmp_path / f"out-{column}" / name
        out.parent.mkdir()
        export(batches(tmp_path / f"in-{column}", column), out,
               ExportOptions(fmt, filter=KEEP_ALL))
        files.append(out.read_bytes())
    assert files[0] == files[1]
    if fmt == "parquet":
        assert pq.read_schema(out).names == EXPORT_SCHEMA_TURNS.names

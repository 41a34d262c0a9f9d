"""Exported rows equal the shard rows id for id; masks follow the mask-start option; the
filters keep and drop what they say and count it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from export_helpers import FINGERPRINT, expected_mask, make_row, read_jsonl, shard_rows, write_batch

from eagle_tui.core.errors import ConfigError
from eagle_tui.core.export.options import DEFAULT_DROP_FLAGS, ExportOptions, RowFilter
from eagle_tui.core.export.run import export

ROWS = 130


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("export") / "batch"
    return write_batch(directory, [make_row(i) for i in range(ROWS)])


def kept(rows: list[dict[str, Any]], row_filter: RowFilter) -> list[dict[str, Any]]:
    return [r for r in rows if row_filter.reason(r["flags"], r["finish_reason"]) is None]


@pytest.mark.parametrize(("fmt", "mask_start", "offset"), [
    ("speculators", None, 0), ("speculators", "prompt-1", 1),
    ("specforge", None, 1), ("specforge", "prompt", 0),
])
def test_jsonl_rows_equal_shard_rows_id_for_id(
    batch: Path, tmp_path: Path, fmt: Any, mask_start: Any, offset: int
) -> None:
    out = tmp_path / "train.jsonl"
    result = export([batch], out, ExportOptions(fmt, mask_start))
    source = kept(shard_rows(batch), RowFilter())
    exported = read_jsonl(out)
    assert len(exported) == len(source) == result.counts.kept > 0
    for row, shard_row in zip(exported, source, strict=True):
        assert row["input_ids"] == shard_row["input_ids"]
        assert row["loss_mask"] == expected_mask(shard_row, offset)
        assert all(type(i) is int for i in row["input_ids"])
    expected_keys = {"id", "input_ids", "loss_mask", "metadata"} if fmt == "speculators" \
        else {"input_ids", "loss_mask"}
    assert all(set(row) == expected_keys for row in exported)


def test_speculators_metadata_names_the_sample(batch: Path, tmp_path: Path) -> None:
    out = tmp_path / "train.jsonl"
    export([batch], out, ExportOptions("speculators"))
    source = kept(shard_rows(batch), RowFilter())
    for row, shard_row in zip(read_jsonl(out), source, strict=True):
        meta = row["metadata"]
        assert row["id"] == meta["sample_id"] == shard_row["sample_id"]
        for name in ("prompt_len", "finish_reason", "matched_stop", "flags", "think_end",
                     "endpoint", "rid"):
            assert meta[name] == shard_row[name], name
        assert meta["tokenizer_fingerprint"] == FINGERPRINT


def test_parquet_keeps_every_shard_column_and_adds_the_mask(batch: Path, tmp_path: Path) -> None:
    out = tmp_path / "train.parquet"
    export([batch], out, ExportOptions("parquet", "prompt-1"))
    table = pq.read_table(out)
    source = kept(shard_rows(batch), RowFilter())
    exported = table.to_pylist()
    assert len(exported) == len(source)
    for row, shard_row in zip(exported, source, strict=True):
        assert {k: v for k, v in row.items() if k != "loss_mask"} == shard_row
        assert row["loss_mask"] == expected_mask(shard_row, 1)
    assert str(table.schema.field("input_ids").type) == "list<element: int32>"
    assert pq.ParquetFile(out).metadata.num_row_groups > 1  # streamed, group by group


def test_default_filter_drops_the_inexact_rows_and_counts_each_reason(
    batch: Path, tmp_path: Path
) -> None:
    result = export([batch], tmp_path / "t.jsonl", ExportOptions("specforge"))
    rows = shard_rows(batch)
    for flag in DEFAULT_DROP_FLAGS:
        assert result.counts.dropped.get(flag, 0) == sum(flag in r["flags"] for r in rows)
    assert result.counts.rows == ROWS
    assert result.counts.kept + sum(result.counts.dropped.values()) == ROWS


def test_keep_drop_flags_and_finish_reasons(batch: Path, tmp_path: Path) -> None:
    row_filter = RowFilter.build(keep_flags=["aborted"], drop_flags=["tool_call"],
                                 finish=["stop", "abort"])
    out = tmp_path / "t.jsonl"
    result = export([batch], out, ExportOptions("speculators", filter=row_filter))
    exported = read_jsonl(out)
    assert {r["metadata"]["finish_reason"] for r in exported} == {"stop", "abort"}
    assert any("aborted" in r["metadata"]["flags"] for r in exported)
    assert not any("tool_call" in r["metadata"]["flags"] for r in exported)
    assert result.counts.dropped["finish=length"] == sum(
        r["finish_reason"] == "length" for r in shard_rows(batch))
    assert [r["input_ids"] for r in exported] == [
        r["input_ids"] for r in kept(shard_rows(batch), row_filter)]


def test_unknown_flags_and_finish_reasons_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"unknown flag.*no_such_flag"):
        RowFilter.build(keep_flags=["no_such_flag"])
    with pytest.raises(ConfigError, match="--finish"):
        RowFilter.build(finish=["stopped"])
    with pytest.raises(ConfigError, match="both kept and dropped"):
        RowFilter.build(keep_flags=["aborted"], drop_flags=["aborted"])


@pytest.mark.parametrize(("mask_start", "offset"), [("prompt", 0), ("prompt-1", 1)])
def test_max_length_reports_rows_a_trainer_would_cut_or_drop(
    batch: Path, tmp_path: Path, mask_start: Any, offset: int
) -> None:
    limit = 12
    result = export([batch], tmp_path / "t.jsonl",
                    ExportOptions("speculators", mask_start, max_length=limit))
    source = kept(shard_rows(batch), RowFilter())
    too_long = [r for r in source if len(r["input_ids"]) > limit]
    dropped = [r for r in too_long if sum(expected_mask(r, offset)[:limit]) == 0]
    assert result.counts.length is not None
    assert result.counts.length.dropped == len(dropped) > 0
    assert result.counts.length.cut == len(too_long) - len(dropped) > 0
    assert len(read_jsonl(tmp_path / "t.jsonl")) == len(source)  # reported, not applied

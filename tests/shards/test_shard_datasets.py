"""A shard loads with Hugging Face ``datasets`` (skipped when it is not installed)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import ModuleType

from shard_helpers import CONFIG, META, make_row

from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.shards.writer import ShardWriter


def test_load_dataset_parquet_reads_a_shard(batch_dir: Path, tmp_path: Path,
                                           hf_datasets: ModuleType) -> None:
    rows = [make_row(i, flags=["tool_call"] if i == 1 else []) for i in range(6)]
    with ShardWriter(batch_dir, metadata=META, max_rows=4) as writer:
        for row in rows:
            writer.add(row)
    files = sorted(str(p) for p in (batch_dir / "shards").glob("*.parquet"))
    loaded = hf_datasets.load_dataset("parquet", data_files=files, split="train",
                                      cache_dir=str(tmp_path / "hf-cache"))
    assert loaded.num_rows == 6
    assert loaded["sample_id"] == [r.sample_id for r in rows]
    assert loaded[1]["input_ids"] == list(rows[1].input_ids)
    assert loaded[1]["flags"] == ["tool_call"]
    assert loaded[4]["matched_stop"] is None
    assert loaded.features["input_ids"].feature.dtype == "int32"


def test_load_dataset_parquet_reads_the_acceptance_column(tmp_path: Path,
                                                          hf_datasets: ModuleType) -> None:
    """A fresh batch's shards (with the acceptance column, null where none) load as one."""
    counts = {"completion_tokens": 9, "verify_steps": 3, "correct_drafts": 5,
              "proposed_drafts": 9, "histogram": [0, 1, 2]}
    rows = [replace(make_row(i), acceptance=counts if i % 2 else None) for i in range(6)]
    manifest = Manifest(tmp_path / "b", CONFIG, acceptance_column=True)
    manifest.save_atomic()
    with ShardWriter(tmp_path / "b", metadata=META, manifest=manifest, max_rows=4) as writer:
        for row in rows:
            writer.add(row)
    files = sorted(str(p) for p in (tmp_path / "b" / "shards").glob("*.parquet"))
    loaded = hf_datasets.load_dataset("parquet", data_files=files, split="train",
                                      cache_dir=str(tmp_path / "hf-cache"))
    assert loaded["acceptance"] == [counts if i % 2 else None for i in range(6)]

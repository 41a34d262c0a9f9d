"""The acceptance column: a fresh batch's shards carry it (null where the server returned no
figures), a batch begun before it keeps its shards without it when resumed (so its files
still read as one table), and resume's trust check and the readers take both."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from shard_helpers import CONFIG, META, make_row

from eagle_tui.core.accept.requests import RequestAcceptance, stored_acceptance
from eagle_tui.core.capture.rows import column_counts as counts_to_store
from eagle_tui.core.shards.batchdir.opening import open_batch_dir
from eagle_tui.core.shards.batchdir.scan import scan_completed
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.shards.reader import ShardReader
from eagle_tui.core.shards.schema import (
    ACCEPTANCE_FIELD,
    MULTI_TURN_SCHEMA_VERSION,
    SHARD_SCHEMA,
    SHARD_SCHEMA_V2,
    ShardMetadata,
    ShardRow,
    rows_to_table,
)
from eagle_tui.core.shards.writer import ShardWriter

OLD_BATCH = Path(__file__).parent.parent / "fixtures" / "written_by_b53df5b" / "batch"
ACCEPTANCE = RequestAcceptance(completion_tokens=20, verify_steps=6, correct_drafts=10,
                               proposed_drafts=18, histogram=(1, 2, 1, 2))


def with_acceptance(i: int) -> ShardRow:
    """Row ``i``; every other one answered by a speculating server."""
    return replace(make_row(i), acceptance=counts_to_store(ACCEPTANCE) if i % 2 else None)


def shard_files(directory: Path) -> list[Path]:
    return [directory / "shards" / s.name for s in Manifest.load(directory).shards]


def write(directory: Path, rows: list[ShardRow], manifest: Manifest,
          metadata: ShardMetadata = META) -> None:
    with ShardWriter(directory, metadata=metadata, manifest=manifest, max_rows=3,
                     row_group_rows=2) as writer:
        for row in rows:
            writer.add(row)


def test_a_fresh_batch_stores_acceptance_and_reads_it_back(tmp_path: Path) -> None:
    opened = open_batch_dir(tmp_path / "b", CONFIG, schema_version=1, partition=None,
                            resume=False, force=False)
    assert opened.manifest.acceptance_column
    assert json.loads((tmp_path / "b" / "manifest.json").read_text())["acceptance_column"]
    write(tmp_path / "b", [with_acceptance(i) for i in range(7)], opened.manifest)
    table = pq.read_table(shard_files(tmp_path / "b"))
    assert table.schema == SHARD_SCHEMA.append(ACCEPTANCE_FIELD)
    stored = table["acceptance"].to_pylist()
    assert stored[0] is None and stored[2] is None
    assert stored[1] == {"completion_tokens": 20, "verify_steps": 6, "correct_drafts": 10,
                         "proposed_drafts": 18, "histogram": [1, 2, 1, 2]}
    reader = ShardReader(tmp_path / "b", verify=True)
    assert stored_acceptance(reader.row(3).acceptance) == ACCEPTANCE
    assert reader.row(4).acceptance is None and not reader.ignored
    # resumed, the batch keeps the column
    resumed = open_batch_dir(tmp_path / "b", CONFIG, schema_version=1, partition=None,
                             resume=True, force=False)
    assert resumed.manifest.acceptance_column and resumed.scan is not None
    assert len(resumed.scan.sample_ids) == 7 and not resumed.scan.ignored


def test_a_batch_begun_before_the_column_keeps_its_shards_without_it(tmp_path: Path) -> None:
    batch = tmp_path / "old"
    shutil.copytree(OLD_BATCH, batch)
    before = Manifest.load(batch)
    assert not before.acceptance_column
    opened = open_batch_dir(batch, before.config, schema_version=1, partition=None,
                            resume=True, force=False)
    assert not opened.manifest.acceptance_column
    footer = ShardReader(batch).metadata
    assert footer is not None
    write(batch, [with_acceptance(i) for i in range(100, 104)], opened.manifest, footer)
    assert "acceptance_column" not in json.loads((batch / "manifest.json").read_text())
    files = shard_files(batch)
    assert len(files) > len(before.shards)
    assert {tuple(pq.read_schema(f).names) for f in files} == {tuple(SHARD_SCHEMA.names)}
    assert pq.read_table(files).num_rows == before.counts.done + 4
    scan = scan_completed(batch)
    assert not scan.ignored and len(scan.trusted) == len(files)
    reader = ShardReader(batch, verify=True)
    assert not reader.ignored
    assert all(reader.row(i).acceptance is None for i in range(len(reader)))


def test_a_multi_turn_table_carries_both(tmp_path: Path) -> None:
    rows = [replace(with_acceptance(i), conversation_id="c", turn=i, parent_id=None)
            for i in range(2)]
    table = rows_to_table(rows, MULTI_TURN_SCHEMA_VERSION, acceptance=True)
    assert table.schema == SHARD_SCHEMA_V2.append(ACCEPTANCE_FIELD)
    back = [ShardRow.from_dict(row) for row in table.to_pylist()]
    assert back[1].turn == 1 and stored_acceptance(back[1].acceptance) == ACCEPTANCE
    assert back[0].acceptance is None
    assert rows_to_table(rows).schema == SHARD_SCHEMA  # without the column: left out


@pytest.mark.parametrize("bad", [
    {"histogram": (1, 1 << 31)},
    {"verify_steps": 1 << 31},
])
def test_a_count_beyond_the_column_is_not_stored(bad: dict[str, Any]) -> None:
    import msgspec

    assert counts_to_store(msgspec.structs.replace(ACCEPTANCE, **bad)) is None
    assert counts_to_store(None) is None


def test_a_malformed_stored_value_says_which_field() -> None:
    with pytest.raises(ValueError, match="verify_steps"):
        stored_acceptance({"completion_tokens": 1, "verify_steps": "x"})


def test_the_columns_fields_are_request_acceptances() -> None:
    """The stored struct converts to and from ``RequestAcceptance`` by field name."""
    assert [f.name for f in ACCEPTANCE_FIELD.type] == list(RequestAcceptance.__struct_fields__)

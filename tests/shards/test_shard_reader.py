"""ShardReader: counts from footers, paging by row group, lookups, and big data kept on disk."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from shard_helpers import META, T0, make_row, new_batch

from eagle_tui.core.errors import ShardError
from eagle_tui.core.fsio import file_sha256
from eagle_tui.core.shards.manifest import ShardInfo
from eagle_tui.core.shards.reader import ShardReader
from eagle_tui.core.shards.schema import SHARD_SCHEMA
from eagle_tui.core.shards.writer import ShardWriter

ROWS = 37


@pytest.fixture
def batch(batch_dir: Path) -> Path:
    """37 rows in shards of 10 rows, row groups of 4."""
    with ShardWriter(batch_dir, metadata=META, max_rows=10, row_group_rows=4) as writer:
        for i in range(ROWS):
            writer.add(make_row(i, tokens=5 + i))
    return batch_dir


def sample_ids(table: pa.Table) -> list[str]:
    return [str(v) for v in table.column("sample_id").to_pylist()]


def test_counts_rows_from_footers_and_pages_across_boundaries(batch: Path) -> None:
    reader = ShardReader(batch)
    assert len(reader) == reader.num_rows == ROWS
    assert [s.rows for s in reader.shards] == [10, 10, 10, 7]
    for start, count in [(0, 3), (3, 9), (8, 15), (35, 10), (36, 1), (0, ROWS)]:
        expected = [f"s{i:06d}" for i in range(start, min(start + count, ROWS))]
        assert sample_ids(reader.page(start, count)) == expected, (start, count)
    assert reader.page(ROWS, 5).num_rows == 0
    assert reader.page(5, 0).schema.equals(SHARD_SCHEMA)


def test_page_reads_only_the_row_groups_and_columns_it_needs(
    batch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[tuple[int, Any]] = []
    real = pq.ParquetFile.iter_batches

    def spy(self: pq.ParquetFile, *args: Any, row_groups: Any = None, columns: Any = None,
            **kw: Any) -> Any:
        reads.extend((i, columns) for i in row_groups)
        return real(self, *args, row_groups=row_groups, columns=columns, **kw)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    reader = ShardReader(batch)
    table = reader.page(13, 4, columns=["sample_id", "flags"])  # shard 1, groups 0 and 1
    assert table.column_names == ["sample_id", "flags"]
    assert reads == [(0, ["sample_id", "flags"]), (1, ["sample_id", "flags"])]


def test_row_by_index_and_by_sample_id(batch: Path) -> None:
    reader = ShardReader(batch)
    row = reader.row(21)
    assert row.sample_id == "s000021" and list(row.input_ids) == list(make_row(21,
                                                                              tokens=26).input_ids)
    assert row.created_at == make_row(21).created_at
    assert reader.row(-1).sample_id == "s000036"
    with pytest.raises(IndexError, match="out of range"):
        reader.row(ROWS)
    assert reader.index_of("s000030") == 30
    got = reader.get("s000030")
    assert got is not None and got.rid == "rid-30"
    assert reader.get("nope") is None


def test_iter_rows_and_metadata(batch: Path) -> None:
    reader = ShardReader(batch)
    rows = list(reader.iter_rows(columns=["sample_id"]))
    assert rows[0] == {"sample_id": "s000000"} and len(rows) == ROWS
    assert reader.metadata == META


def test_reads_one_file_and_a_directory_without_manifest(batch: Path) -> None:
    one = ShardReader(batch / "shards" / "part-00001.parquet")
    assert one.num_rows == 10 and one.row(0).sample_id == "s000010"
    (batch / "manifest.json").unlink()
    assert ShardReader(batch).num_rows == ROWS
    assert ShardReader(batch / "shards").num_rows == ROWS


def test_manifest_decides_which_files_count(batch: Path) -> None:
    shards = batch / "shards"
    (shards / "part-00099.parquet.tmp").write_bytes(b"junk")
    pq.write_table(pa.table({"x": [1]}), shards / "part-00098.parquet")  # unlisted
    truncated = shards / "part-00003.parquet"
    truncated.write_bytes(truncated.read_bytes()[:-10])
    reader = ShardReader(batch)
    assert reader.num_rows == 30
    (ignored,) = reader.ignored
    assert ignored.path == truncated and "truncated" in ignored.reason


def test_verify_catches_same_size_corruption(batch: Path) -> None:
    path = batch / "shards" / "part-00000.parquet"
    data = bytearray(path.read_bytes())
    data[100] ^= 0x01
    path.write_bytes(bytes(data))
    assert ShardReader(batch).num_rows == ROWS  # size checks only, by default
    assert ShardReader(batch, verify=True).num_rows == ROWS - 10


def test_missing_path_and_broken_file_are_shard_errors(tmp_path: Path) -> None:
    with pytest.raises(ShardError, match="does not exist"):
        ShardReader(tmp_path / "nope")
    broken = tmp_path / "x.parquet"
    broken.write_bytes(b"PAR1garbage")
    with pytest.raises(ShardError, match="not a readable parquet shard"):
        ShardReader(broken)


def test_empty_batch_has_no_rows(batch_dir: Path) -> None:
    reader = ShardReader(batch_dir)
    assert reader.num_rows == 0 and reader.metadata is None
    assert reader.page(0, 10).num_rows == 0


# -- a few hundred MB --------------------------------------------------------------------

BIG_SHARDS, BIG_ROWS, BIG_TOKENS, BIG_GROUP = 4, 5_000, 4096, 512


def big_table(shard: int, values: pa.Array) -> pa.Table:
    """BIG_ROWS rows of BIG_TOKENS ids, built column-wise (fast, no Python lists)."""
    offsets = pa.array(np.arange(0, BIG_ROWS * BIG_TOKENS + 1, BIG_TOKENS, dtype=np.int32))
    n = BIG_ROWS
    columns = {
        "sample_id": pa.array([f"b{shard}-{i}" for i in range(n)]),
        "input_ids": pa.ListArray.from_arrays(offsets, values,
                                              type=SHARD_SCHEMA.field("input_ids").type),
        "prompt_len": pa.array(np.full(n, 100, dtype=np.int32)),
        "finish_reason": pa.array(["stop"] * n),
        "matched_stop": pa.array([163586] * n, pa.int64()),
        "think_end": pa.array(np.full(n, 900, dtype=np.int32)),
        "flags": pa.array([[] for _ in range(n)], SHARD_SCHEMA.field("flags").type),
        "endpoint": pa.array(["http://gpu"] * n),
        "rid": pa.array([f"r{i}" for i in range(n)]),
        "latency_s": pa.array(np.ones(n, dtype=np.float32)),
        "created_at": pa.array([T0] * n, SHARD_SCHEMA.field("created_at").type),
    }
    return pa.table(columns, schema=SHARD_SCHEMA.with_metadata(META.to_parquet()))


@pytest.fixture(scope="module")
def big_batch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """~200 MB of shards (random ids barely compress: ~2.5 bytes each), listed in a manifest."""
    directory = tmp_path_factory.mktemp("big")
    manifest = new_batch(directory)
    manifest.shards_dir.mkdir()
    rng = np.random.default_rng(1)
    values = pa.array(rng.integers(0, 163840, BIG_ROWS * BIG_TOKENS, dtype=np.int32))
    for shard in range(BIG_SHARDS):
        path = manifest.shards_dir / f"part-{shard:05d}.parquet"
        # Fast settings for the fixture only: the reader does not care how it was encoded.
        pq.write_table(big_table(shard, values), path, compression="zstd", compression_level=1,
                       use_dictionary=["sample_id"], row_group_size=BIG_GROUP)
        manifest.add_shard(ShardInfo(path.name, BIG_ROWS, file_sha256(path),
                                     path.stat().st_size, 0, f"b{shard}-0", "x"))
    manifest.save_atomic()
    yield directory


@pytest.mark.slow  # builds things: a few hundred MB of shards
def test_paging_a_few_hundred_mb_stays_memory_light(big_batch: Path) -> None:
    on_disk = sum(p.stat().st_size for p in (big_batch / "shards").iterdir())
    assert on_disk > 150 << 20
    gc.collect()
    process = psutil.Process()
    before = process.memory_info().rss
    reader = ShardReader(big_batch)
    assert reader.num_rows == BIG_SHARDS * BIG_ROWS
    last = reader.row(-1)
    assert last.sample_id == f"b{BIG_SHARDS - 1}-{BIG_ROWS - 1}"
    assert len(last.input_ids) == BIG_TOKENS
    for start in (0, 7_345, 12_990, 19_950):
        assert reader.page(start, 20, columns=["sample_id", "prompt_len"]).num_rows == 20
    assert reader.page(4_995, 10).num_rows == 10  # across a shard boundary, all columns
    grown = process.memory_info().rss - before
    assert grown < 96 << 20, f"RSS grew {grown >> 20} MiB reading {on_disk >> 20} MiB of shards"

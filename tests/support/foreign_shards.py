"""A foreign shard: a plain parquet file of the shard schema with no eagle-tui footer, of any
row count and row-group size, and a batch directory whose manifest lists it (checksum and
rows fixed). Issue 39 item 15's reads in bounded memory are tested and measured on these
(tests/export/test_tampered_shards.py, tests/benchmarks/bench_hostile_memory.py)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from eagle_tui.core.shards.manifest import BatchConfig, Manifest, ShardInfo
from eagle_tui.core.shards.schema import SHARD_SCHEMA

IDS = 16
"""Ids per row of a foreign shard (~1.5 MB for 2,000,000 rows)."""


def foreign_shard(path: Path, rows: int, group_rows: int) -> Path:
    """``rows`` rows of :data:`IDS` ids each, in row groups of ``group_rows``."""
    numbers = pa.array(np.arange(rows, dtype=np.int64))
    offsets = pa.array(np.arange(0, IDS * rows + 1, IDS, dtype=np.int32))
    columns = {
        "sample_id": pc.binary_join_element_wise("f", numbers.cast(pa.string()), ""),
        "input_ids": pa.ListArray.from_arrays(
            offsets, pa.array(np.tile(np.arange(1, IDS + 1, dtype=np.int32), rows))),
        "prompt_len": pa.array(np.full(rows, 2, dtype=np.int32)),
        "finish_reason": pa.array(["stop"] * rows),
        "matched_stop": pa.nulls(rows, pa.int64()),
        "think_end": pa.array(np.full(rows, -1, dtype=np.int32)),
        "flags": pa.ListArray.from_arrays(pa.array(np.zeros(rows + 1, dtype=np.int32)),
                                          pa.array([], pa.string())),
        "endpoint": pa.array(["x"] * rows),
        "rid": pa.array(["r"] * rows),
        "latency_s": pa.array(np.full(rows, 0.5, dtype=np.float32)),
        "created_at": pa.array(np.zeros(rows, dtype=np.int64)).cast(
            SHARD_SCHEMA.field("created_at").type),
    }
    pq.write_table(pa.table(columns), path, row_group_size=group_rows, compression="zstd")
    return path


def batch_of(shard: Path, directory: Path, config: BatchConfig) -> Path:
    """A batch directory whose manifest lists ``shard`` (hard-linked in as its one shard)."""
    (directory / "shards").mkdir(parents=True)
    target = directory / "shards" / "part-00000.parquet"
    os.link(shard, target)
    manifest = Manifest(directory, config)
    data = target.read_bytes()
    manifest.add_shard(ShardInfo(target.name, pq.ParquetFile(target).metadata.num_rows,
                                 hashlib.sha256(data).hexdigest(), len(data), 0, "f0", "f1"))
    manifest.save_atomic()
    return directory

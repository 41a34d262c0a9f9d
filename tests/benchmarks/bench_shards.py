"""Shard write/read figures: throughput, size per token, paging latency, memory.

Run: ``python tests/benchmarks/bench_shards.py [--rows 4000] [--tokens 4096] [--dir DIR]``.
Ids follow a Zipf-like distribution (closer to real text than uniform noise).
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import numpy as np
import psutil

from eagle_tui.core.samples.job import Job
from eagle_tui.core.samples.select import SampleFilter, first_matching
from eagle_tui.core.sampling import SamplingIdentity, SamplingPreset
from eagle_tui.core.shards.batchdir.scan import scan_completed
from eagle_tui.core.shards.manifest import BatchConfig, Manifest
from eagle_tui.core.shards.reader import ShardReader
from eagle_tui.core.shards.schema import FooterTokenizer, ShardMetadata, ShardRow
from eagle_tui.core.shards.stats import compute_stats
from eagle_tui.core.shards.writer import ShardWriter

T = TypeVar("T")
META = ShardMetadata(tokenizer=FooterTokenizer(name="bench", path="/none", fingerprint="f",
                                               vocab_size=163840),
                     template_hash="t", boundary_ids={"think": 163606})


def timed(label: str, action: Callable[[], T]) -> T:
    start = time.perf_counter()
    result = action()
    print(f"{label:<44} {1000 * (time.perf_counter() - start):9.1f} ms")
    return result


def make_rows(count: int, tokens: int) -> Iterator[ShardRow]:
    """Rows generated lazily, so memory stays flat whatever the count."""
    rng = np.random.default_rng(0)
    now = datetime.now(UTC)
    for i in range(count):
        ids = (rng.zipf(1.2, size=tokens) % 163840).astype(np.int32).tolist()
        yield ShardRow(f"sample-{i:08d}", ids, tokens // 8, "stop", 163586, tokens // 2,
                       ["tool_call"] if i % 7 == 0 else [], "http://gpu-0:30000", f"rid-{i}",
                       random.random(), now)


def bench_write(directory: Path, rows: Iterator[ShardRow]) -> None:
    """Time spent inside ShardWriter only (row generation excluded)."""
    manifest = Manifest(directory, BatchConfig("p", "h", "t", "f", "t",
                                                    SamplingIdentity(4096, (SamplingPreset(),))))
    manifest.save_atomic()
    seconds, count, tokens = 0.0, 0, 0
    writer = ShardWriter(directory, metadata=META, manifest=manifest)
    for row in rows:
        start = time.perf_counter()
        writer.add(row)
        seconds += time.perf_counter() - start
        count, tokens = count + 1, tokens + len(row.input_ids)
    start = time.perf_counter()
    writer.close()
    seconds += time.perf_counter() - start
    size = sum(s.bytes for s in manifest.shards)
    print(f"write {count} rows / {tokens / 1e6:.1f} M tokens in {seconds:.2f} s: "
          f"{count / seconds:,.0f} rows/s, {tokens / seconds / 1e6:.2f} M tokens/s, "
          f"{size / seconds / 2**20:.1f} MiB/s")
    print(f"on disk: {size / 2**20:.1f} MiB in {len(manifest.shards)} shards, "
          f"{size / tokens:.2f} bytes/token")


def bench_read(directory: Path, count: int) -> None:
    gc.collect()
    process = psutil.Process()
    before = process.memory_info().rss
    reader = timed("open (footers only)", lambda: ShardReader(directory))
    timed("page(middle, 50) metadata columns",
          lambda: reader.page(count // 2, 50, columns=["sample_id", "flags", "finish_reason"]))
    timed("page(middle, 50) again (cached row group)",
          lambda: reader.page(count // 2, 50, columns=["sample_id", "flags", "finish_reason"]))
    timed("row(-1), all columns", lambda: reader.row(-1))
    timed("index_of (first call builds the index)", lambda: reader.index_of("sample-00000001"))
    timed("index_of (second call)", lambda: reader.index_of(f"sample-{count - 1:08d}"))
    timed("first_matching(flag) (flags and finish_reason columns scan)",
          lambda: first_matching(Job([reader]), SampleFilter(flag="absent")))
    print(f"RSS growth while paging: {(process.memory_info().rss - before) / 2**20:.1f} MiB")
    timed("compute_stats (reads input_ids lengths)", lambda: compute_stats(reader))
    timed("scan_completed (sha256 + sample_id column)", lambda: scan_completed(directory))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: tmp)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        directory = Path(tmp) / "batch"
        bench_write(directory, make_rows(args.rows, args.tokens))
        bench_read(directory, args.rows)


if __name__ == "__main__":
    main()

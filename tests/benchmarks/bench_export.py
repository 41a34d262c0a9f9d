"""Export figures: rows/s, MiB/s and peak RSS per format, next to a plain pyarrow read.

Run: ``python tests/benchmarks/bench_export.py [--gib 1.0] [--tokens 4096] [--dir DIR]``.
Writes ~``--gib`` of shards with the project's own ShardWriter (Zipf-like ids, closer to
text than noise; reused when ``DIR`` already holds a batch), then measures, each in a fresh
process so peak RSS is its own: a plain pyarrow read of every row group (all columns), the
export's verification alone (checksums + sample ids), and ``export`` to each format.
MiB/s counts shard bytes read; user and system CPU seconds are the measuring process's
(system time is where page-cache and page-fault costs show). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from eagle_tui.core.export.options import ExportOptions
from eagle_tui.core.export.run import export
from eagle_tui.core.samples.job import open_batches
from eagle_tui.core.sampling import SamplingIdentity, SamplingPreset
from eagle_tui.core.shards.manifest import BatchConfig, Manifest
from eagle_tui.core.shards.schema import FooterTokenizer, ShardMetadata, ShardRow
from eagle_tui.core.shards.writer import ShardWriter

META = ShardMetadata(tokenizer=FooterTokenizer(name="bench", path="/none", fingerprint="f" * 64,
                                               vocab_size=163840),
                     template_hash="t", boundary_ids={"think": 163606})
MEASURES = ("pyarrow", "verify", "speculators", "specforge", "parquet")


def make_rows(tokens: int) -> Iterator[ShardRow]:
    """Endless rows, generated lazily (memory stays flat); ids as array('i') like capture."""
    rng = np.random.default_rng(0)
    now = datetime.now(UTC)
    for i in range(10**9):
        ids = array("i", ((rng.zipf(1.2, size=tokens) % 163840).astype(np.int32)).tobytes())
        flags = ["aborted"] if i % 50 == 0 else (["tool_call"] if i % 7 == 0 else [])
        yield ShardRow(f"sample-{i:08d}", ids, tokens // 8, "stop", 163586, tokens // 2, flags,
                       "http://gpu-0:30000", f"rid-{i}", 1.0, now)


def write_shards(directory: Path, gib: float, tokens: int) -> None:
    """Shards until ``gib`` GiB are on disk (skipped when ``directory`` has a batch)."""
    if (directory / "manifest.json").exists():
        return
    sampling = SamplingIdentity(tokens, (SamplingPreset(),))
    manifest = Manifest(directory, BatchConfig("p", "h", "t", "f" * 64, "t", sampling))
    manifest.save_atomic()
    start = time.perf_counter()
    with ShardWriter(directory, metadata=META, manifest=manifest) as writer:
        for row in make_rows(tokens):
            writer.add(row)
            if sum(s.bytes for s in manifest.shards) >= gib * 2**30:
                break
    print(f"wrote {manifest.counts.done:,} rows in {len(manifest.shards)} shards in "
          f"{time.perf_counter() - start:.0f} s")


def measure(what: str, directory: Path, scratch: Path) -> dict[str, float]:
    """One measurement in this process; returns seconds, rows and peak RSS (MiB)."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    rows = 0
    if what == "pyarrow":
        for path in sorted((directory / "shards").glob("*.parquet")):
            parquet = pq.ParquetFile(path)
            for group in range(parquet.num_row_groups):
                rows += parquet.read_row_group(group).num_rows
    elif what == "verify":
        rows = sum(batch.rows for batch in open_batches([directory]))
    else:
        out = scratch / f"export.{what}"
        result = export([directory], out, ExportOptions(what, max_length=8192))  # type: ignore[arg-type]
        rows = result.counts.rows
        print(f"  {what}: {result.counts.text(lead='kept')}; output "
              f"{result.bytes / 2**20:,.0f} MiB", file=sys.stderr)
        out.unlink()
        result.manifest_path.unlink()  # a later measurement writes the same name
    seconds = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"seconds": seconds, "rows": rows, "peak_rss_mib": usage.ru_maxrss / 1024,
            "user_s": usage.ru_utime - before.ru_utime,
            "system_s": usage.ru_stime - before.ru_stime}


def run_child(what: str, directory: Path, scratch: Path,
              pool: str | None = None) -> dict[str, float]:
    """``what`` measured in a fresh process; ``pool`` names the Arrow pool it must keep
    (the export otherwise picks jemalloc, core/export/pool.py)."""
    command = [sys.executable, __file__, "--measure", what, "--dir", str(directory),
               "--scratch", str(scratch)]
    env = dict(os.environ, ARROW_DEFAULT_MEMORY_POOL=pool) if pool else None
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    sys.stderr.write(done.stderr)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def report(directory: Path, scratch: Path) -> None:
    size = sum(p.stat().st_size for p in (directory / "shards").glob("*.parquet"))
    print(f"shards: {size / 2**20:,.0f} MiB in {directory}")
    figures = {what: run_child(what, directory, scratch) for what in MEASURES}
    # the same export on pyarrow's default pool: the figure before the export chose its own
    figures["speculators, mimalloc"] = run_child("speculators", directory, scratch, "mimalloc")
    figures["pyarrow (again)"] = run_child("pyarrow", directory, scratch)
    base = min(figures["pyarrow"]["seconds"], figures["pyarrow (again)"]["seconds"])
    print(f"{'':<22}{'s':>8}{'user s':>8}{'sys s':>7}{'rows/s':>10}{'MiB/s':>9}"
          f"{'peak RSS MiB':>14}{'time x pyarrow':>16}{'speed x pyarrow':>17}")
    for what, f in figures.items():
        print(f"{what:<22}{f['seconds']:>8.1f}{f['user_s']:>8.1f}{f['system_s']:>7.1f}"
              f"{f['rows'] / f['seconds']:>10,.0f}{size / 2**20 / f['seconds']:>9,.0f}"
              f"{f['peak_rss_mib']:>14,.0f}{f['seconds'] / base:>16.2f}"
              f"{base / f['seconds']:>17.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--scratch", type=Path, default=None)
    parser.add_argument("--measure", choices=MEASURES, default=None)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.dir, args.scratch)))
        return
    with tempfile.TemporaryDirectory(prefix="bench-export-") as tmp:
        directory = args.dir or Path(tmp) / "batch"
        write_shards(directory, args.gib, args.tokens)
        report(directory, Path(tmp))


if __name__ == "__main__":
    main()

"""Peak memory against a lying server and a foreign shard (issue 39 items 12 and 15).

Run: ``python tests/benchmarks/bench_hostile_memory.py [--rows 2000000] [--prompts 6]``.

1. ``accept`` through a proxy (``tests/support/meta_proxy.py``) in front of a simulated
   EAGLE3 server that rewrites every answer's ``spec_num_proposed_drafts`` to 10^k with one
   verify step, for several k: before the counts were checked, 10^15 built a 10^15-long
   per-position list (13.3 GB in 120 s). The peak should not depend on k.
2. ``inspect --index 0``, ``stats`` and ``export`` of the same rows (``--rows``, 16 ids
   each) in one row group and in groups of 512 rows (the writer's): before reads were
   batched, one 2,000,000-row group cost inspect 2.4 GB, stats 2.3 GB, export 3.7 GB. The
   peak should not depend on the row-group size.

Each figure is the peak RSS of the verb's own process (``wait4`` in
``tests/support/peak_rss.py``), in MiB. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eagle_tui.core.argtypes import Whole
from eagle_tui.core.sampling import SamplingIdentity, SamplingPreset
from eagle_tui.core.shards.manifest import BatchConfig
from eagle_tui.core.sim.args import BUNDLED_MODEL_DIR
from eagle_tui.core.sim.launcher import SimProcess

SUPPORT = Path(__file__).resolve().parents[1] / "support"
sys.path.insert(0, str(SUPPORT.parent))
from support.foreign_shards import IDS, batch_of, foreign_shard  # noqa: E402

CONFIG = BatchConfig("/p.jsonl", "00" * 32, "/t", "ab" * 32, "",
                     SamplingIdentity(16, (SamplingPreset(),)))


def peak(argv: list[str], cwd: Path, timeout: float = 600) -> tuple[int, float, float]:
    """(exit status, peak RSS in MiB, seconds) of ``eagle-tui ARGV`` in its own process."""
    rss = cwd / "rss.txt"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(SUPPORT / "peak_rss.py"), str(rss),
                           str(timeout), "--", sys.executable, "-m", "eagle_tui.tui.cli",
                           *argv], cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=timeout + 30, check=False)
    return done.returncode, int(rss.read_text()) / 1024, time.perf_counter() - started


def claimed_counts(work: Path, prompts: int) -> None:
    path = work / "p.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "messages": [
        {"role": "user", "content": f"question {i}"}]}) + "\n" for i in range(prompts)))
    print("== 1. accept, every answer claiming 10^k proposed drafts in one verify step")
    with SimProcess(["--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0",
                     "--speculative-algorithm", "EAGLE3"]) as sim:
        sim.wait_ready(timeout=60)
        for exponent in (0, 3, 9, 15):
            change = {} if exponent == 0 else {"spec_num_proposed_drafts": 10**exponent,
                                               "spec_verify_ct": 1}
            proxy = subprocess.Popen([sys.executable, str(SUPPORT / "meta_proxy.py"), sim.url,
                                      json.dumps({"meta_info": change})],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert proxy.stdout is not None and proxy.stdin is not None
            port = proxy.stdout.readline().split()[1]
            code, mib, seconds = peak(["accept", "--prompts", str(path), "--server",
                                       f"http://127.0.0.1:{port}", "--tokenizer",
                                       str(BUNDLED_MODEL_DIR), "--max-new-tokens", "32",
                                       "--no-store"], work)
            proxy.stdin.close()
            proxy.wait(timeout=10)
            proxy.stdout.close()
            claim = "unchanged (control)" if exponent == 0 else f"10^{exponent}"
            print(f"accept, proposed drafts {claim:<20} exit {code}  peak RSS {mib:7.1f} MiB "
                  f"in {seconds:5.1f} s")


def row_groups(work: Path, rows: int) -> None:
    print(f"== 2. {rows:,} rows of {IDS} ids, one row group against groups of 512 rows")
    for group_rows in (rows, 512):
        shard = foreign_shard(work / f"g{group_rows}.parquet", rows, group_rows)
        batch = batch_of(shard, work / f"batch{group_rows}", CONFIG)
        runs = {"inspect --index 0": ["inspect", str(shard), "--index", "0", "--raw-ids"],
                "stats": ["stats", str(batch)],
                "export": ["export", str(batch), "--format", "speculators", "--out",
                           str(work / f"g{group_rows}.jsonl")]}
        for name, argv in runs.items():
            code, mib, seconds = peak(argv, work)
            print(f"{name:<18} groups of {group_rows:>9,} rows ({shard.stat().st_size / 1e6:.1f}"
                  f" MB file)  exit {code}  peak RSS {mib:7.1f} MiB in {seconds:6.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Whole(1, 10**8), default=2_000_000)
    parser.add_argument("--prompts", type=Whole(1, 10_000), default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        claimed_counts(Path(tmp), args.prompts)
        row_groups(Path(tmp), args.rows)


if __name__ == "__main__":
    main()

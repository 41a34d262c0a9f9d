"""Capture CPU per sample, two code versions interleaved (a script, not a test).

Runs ``bench_capture.py``'s own children (the capture engine, and the bare loop with 32
pools of 8) for version A and version B in alternating order, ``--rounds`` times, each
against a fresh fastest sim, and prints per-round CPU-seconds per 1,000 samples and the
capture / bare-loop ratio, then the medians. Interleaving and the ratio to the bare loop
(measured in the same minute) are what make a shared, noisy machine usable.

A version is a ``PYTHONPATH`` under which ``eagle_tui`` imports that code (empty: the
installed one). For another commit::

    git archive 1825cd6 | tar -x -C /tmp/base/src
    mkdir -p /tmp/base/pp/eagle_tui
    for d in core tui themes; do ln -s /tmp/base/src/$d /tmp/base/pp/eagle_tui/$d; done
    python tests/benchmarks/bench_capture_ab.py --a /tmp/base/pp --b '' --rounds 8
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_capture as bench


def one_round(version: str, work: Path, prompts: Path, tag: str) -> tuple[float, float, int]:
    """(capture CPU s per sample, bare-loop CPU s per sample, failed) under ``version``."""
    from eagle_tui.core.sim.launcher import SimProcess

    if version:
        os.environ["PYTHONPATH"] = version  # children and sims inherit it
    else:
        os.environ.pop("PYTHONPATH", None)
    rows = {}
    for mode, extra in (("capture", []), ("bare", ["--pools", "32"])):
        with SimProcess(bench.FAST) as sim:
            sim.wait_ready(60)
            rows[mode] = bench.run_child(mode, "--url", sim.url, "--prompts", str(prompts),
                                         "--out", str(work / f"out-{tag}-{mode}"), *extra)
    capture, bare = rows["capture"], rows["bare"]
    return capture["cpu"] / capture["samples"], bare["cpu"] / bare["samples"], capture["failed"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", default="", help="PYTHONPATH of version A ('' = installed)")
    parser.add_argument("--b", default="", help="PYTHONPATH of version B ('' = installed)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--samples", type=int, default=3000)
    args = parser.parse_args()
    versions = {"A": args.a, "B": args.b}
    results: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp:
        work = Path(tmp)
        prompts = work / "prompts.jsonl"
        bench.write_prompts(prompts, args.samples)
        for r in range(args.rounds):
            for name in ("A", "B") if r % 2 == 0 else ("B", "A"):
                capture, bare, failed = one_round(versions[name], work, prompts, f"{name}{r}")
                results[name].append((capture, bare))
                load = Path("/proc/loadavg").read_text().split()[0]
                print(f"round {r} {name}: capture {1000 * capture:.2f}, bare loop "
                      f"{1000 * bare:.2f} CPU-s per 1,000 samples, ratio {capture / bare:.2f}x "
                      f"({failed} failed, load {load})", flush=True)
    for name, rows in results.items():
        ratios = [c / b for c, b in rows]
        print(f"{name} ({versions[name] or 'installed'}): median capture "
              f"{1000 * statistics.median(c for c, _ in rows):.2f} CPU-s per 1,000 samples, "
              f"median capture / bare loop {statistics.median(ratios):.2f}x "
              f"(range {min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()

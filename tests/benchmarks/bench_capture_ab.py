"""Capture CPU per sample, two code versions interleaved (a script, not a test).

Runs ``bench_capture.py``'s own children (the capture engine, and bare loops with 32 pools
of 8) ``--rounds`` times, each against a fresh fastest sim: in every round the capture of
version A and of version B (alternating which goes first) with the bare loops between them,
and prints per-round CPU-seconds per 1,000 samples and the capture / bare-loop ratios, then
the medians. Interleaving and the ratio to a bare loop measured in the same minute are what
make a shared, noisy machine usable.

The minimal capture loops (``--minimal``) are the least a capture can do on a given client:
a bare loop that also renders each prompt, decodes each answer and writes the rows to
parquet (``bench_capture.child_minimal``); the capture's ratio to them is what its own
bookkeeping (validation, retries, events, progress) costs.

The bare loops (``--bare``, ``bench_capture.BARE_CLIENTS``) only post pre-tokenized ids and
discard the answers: httpx with its default transport (the reference of the README's earlier
figures), httpx over the capture's ``LeanTransport``, and aiohttp; the ratio is given to the
httpx loop and to the best (cheapest) loop of the round. They run under the installed code
whatever the versions, so both versions are compared with the same loops.

A version is a ``PYTHONPATH`` under which ``eagle_tui`` imports that code (empty: the
installed one). For another commit::

    git archive 1825cd6 | tar -x -C /tmp/base/src
    mkdir -p /tmp/base/pp/eagle_tui
    for d in core tui themes; do ln -s /tmp/base/src/$d /tmp/base/pp/eagle_tui/$d; done
    python tests/benchmarks/bench_capture_ab.py --a /tmp/base/pp --b '' --rounds 8
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_capture as bench


def use_version(version: str) -> None:
    """Children and sims started from now on import ``version`` ('' = installed)."""
    if version:
        os.environ["PYTHONPATH"] = version
    else:
        os.environ.pop("PYTHONPATH", None)


def cpu_per_sample(mode: str, work: Path, prompts: Path, tag: str, *extra: str) -> float:
    """CPU seconds per sample of one child against a fresh fastest sim."""
    from eagle_tui.core.sim.launcher import SimProcess

    with SimProcess(bench.FAST) as sim:
        sim.wait_ready(60)
        row = bench.run_child(mode, "--url", sim.url, "--prompts", str(prompts),
                              "--out", str(work / f"out-{tag}"), *extra)
    if row.get("failed"):
        print(f"  ({tag}: {row['failed']} samples failed)", flush=True)
    cpu: float = row["cpu"] / row["samples"]
    return cpu


def one_round(r: int, versions: dict[str, str], bare: list[str], minimal: list[str],
              work: Path, prompts: Path) -> tuple[dict[str, float], dict[str, float]]:
    """Capture CPU per sample of each version and of each bare and minimal loop (keys
    ``minimal <client>``), in one round."""
    first, second = ("A", "B") if r % 2 == 0 else ("B", "A")
    capture: dict[str, float] = {}
    loops: dict[str, float] = {}
    use_version(versions[first])
    capture[first] = cpu_per_sample("capture", work, prompts, f"{first}{r}")
    use_version("")
    for client in bare:
        loops[client] = cpu_per_sample("bare", work, prompts, f"{client}{r}", "--pools", "32",
                                       "--client", client)
    for client in minimal:
        loops[f"minimal {client}"] = cpu_per_sample(
            "minimal", work, prompts, f"min-{client}{r}", "--pools", "32", "--client", client)
    use_version(versions[second])
    capture[second] = cpu_per_sample("capture", work, prompts, f"{second}{r}")
    return capture, loops


def loop_name(client: str) -> str:
    """``bare httpx``, ``minimal lean``: how a loop is named in the figures."""
    return client if client.startswith("minimal") else f"bare {client}"


def available(clients: list[str]) -> list[str]:
    """The bare-loop clients that can run here (aiohttp comes with the test extras)."""
    return [c for c in clients if c != "aiohttp" or importlib.util.find_spec("aiohttp")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", default="", help="PYTHONPATH of version A ('' = installed)")
    parser.add_argument("--b", default="", help="PYTHONPATH of version B ('' = installed)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument("--bare", default=",".join(bench.BARE_CLIENTS),
                        help="bare-loop clients, comma-separated (httpx first: the reference)")
    parser.add_argument("--minimal", default="lean,aiohttp",
                        help="clients of the minimal capture loops, comma-separated")
    args = parser.parse_args()
    versions = {"A": args.a, "B": args.b}
    bare = available([c for c in args.bare.split(",") if c])
    minimal = available([c for c in args.minimal.split(",") if c])
    ratios: dict[str, dict[str, list[float]]] = {"A": {}, "B": {}}
    cpu: dict[str, list[float]] = {"A": [], "B": [], **{c: [] for c in bare},
                                   **{f"minimal {c}": [] for c in minimal}}
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp:
        work = Path(tmp)
        prompts = work / "prompts.jsonl"
        bench.write_prompts(prompts, args.samples)
        for r in range(args.rounds):
            capture, loops = one_round(r, versions, bare, minimal, work, prompts)
            best = min(bare, key=loops.__getitem__)
            load = Path("/proc/loadavg").read_text().split()[0]
            print(f"round {r} (load {load}), CPU-s per 1,000 samples: "
                  + ", ".join(f"capture {n} {1000 * capture[n]:.2f}" for n in "AB") + "; "
                  + ", ".join(f"{loop_name(c)} {1000 * t:.2f}" for c, t in loops.items()),
                  flush=True)
            for name in "AB":
                cpu[name].append(capture[name])
                for reference in [*loops, "best"]:
                    loop = loops[best if reference == "best" else reference]
                    ratios[name].setdefault(reference, []).append(capture[name] / loop)
                print(f"  {name}: capture / bare loop {capture[name] / loops[bare[0]]:.2f}x "
                      f"({bare[0]}), / best bare loop {capture[name] / loops[best]:.2f}x "
                      f"({best})", flush=True)
            for client, seconds in loops.items():
                cpu[client].append(seconds)
    for client in [*bare, *(f"minimal {c}" for c in minimal)]:
        print(f"{loop_name(client)} loop: median {1000 * statistics.median(cpu[client]):.2f} CPU-s "
              "per 1,000 samples")
    for name in "AB":
        by_httpx, by_best = ratios[name][bare[0]], ratios[name]["best"]
        print(f"{name} ({versions[name] or 'installed'}): median capture "
              f"{1000 * statistics.median(cpu[name]):.2f} CPU-s per 1,000 samples, median "
              f"capture / bare loop {statistics.median(by_httpx):.2f}x ({bare[0]}; range "
              f"{min(by_httpx):.2f}-{max(by_httpx):.2f}), / best bare loop "
              f"{statistics.median(by_best):.2f}x (range {min(by_best):.2f}-{max(by_best):.2f})")
        for client in [*bare[1:], *(f"minimal {c}" for c in minimal)]:
            values = ratios[name][client]
            print(f"    {name}: median capture / {loop_name(client)} loop "
                  f"{statistics.median(values):.2f}x (range {min(values):.2f}-"
                  f"{max(values):.2f})")

if __name__ == "__main__":
    main()

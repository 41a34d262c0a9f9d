"""What does ``eagle-tui inspect`` of one sample cost in CPU-seconds? (A script.)

Captures a small batch from the simulated server with the bundled tokenizer (as the
walkthrough does), then runs ``eagle-tui inspect BATCH --index 0`` in fresh processes,
three ways, and prints the median CPU-seconds (user + system) of each:

1. as shipped: the tokenizer read by ``tokenizers`` alone (``core/tokenizer/light.py``);
2. through ``transformers`` (the light path switched off in that process: what ``inspect``
   cost before issue 39 item 10);
3. ``--raw-ids`` (no tokenizer at all: the floor).

and the ratio of 2 to 1.

    python tests/benchmarks/bench_inspect_cpu.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

FAST = ["--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0"]
THROUGH_TRANSFORMERS = (
    "import sys\n"
    "import eagle_tui.core.tokenizer.light as light\n"
    "light.light_tokenizer = lambda directory: None\n"
    "from eagle_tui.tui.cli.main import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_of(command: list[str]) -> float:
    """CPU-seconds of one run of ``command`` (it must exit 0)."""
    before = children_cpu()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return children_cpu() - before


def capture_batch(out: Path) -> None:
    from eagle_tui.core.sim.launcher import SimProcess
    from eagle_tui.core.tokenizer import bundled_tokenizer_path

    prompts = out.parent / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "messages": [
        {"role": "user", "content": f"question {i}"}]}) + "\n" for i in range(4)))
    with SimProcess(FAST) as sim:
        sim.wait_ready(90)
        subprocess.run([str(Path(sys.executable).with_name("eagle-tui")), "capture",
                        "--prompts", str(prompts), "--out", str(out), "--server", sim.url,
                        "--tokenizer", str(bundled_tokenizer_path()), "--max-new-tokens", "64",
                        "--display", "plain"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    eagle = str(Path(sys.executable).with_name("eagle-tui"))
    with tempfile.TemporaryDirectory() as tmp:
        batch = Path(tmp) / "batch"
        capture_batch(batch)
        inspect = ["inspect", str(batch), "--index", "0"]
        ways = {
            "tokenizers alone (shipped)": [eagle, *inspect],
            "through transformers (before)": [sys.executable, "-c", THROUGH_TRANSFORMERS,
                                              *inspect],
            "--raw-ids (no tokenizer)": [eagle, *inspect, "--raw-ids"],
        }
        medians = {name: statistics.median(cpu_of(command) for _ in range(args.runs))
                   for name, command in ways.items()}
    for name, seconds in medians.items():
        print(f"{name:32} median {seconds:.2f} CPU-s over {args.runs} runs")
    ratio = medians["through transformers (before)"] / medians["tokenizers alone (shipped)"]
    print(f"inspect CPU through transformers / tokenizers alone: {ratio:.2f}x")


if __name__ == "__main__":
    main()

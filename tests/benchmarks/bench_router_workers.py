"""Memory of ``status --once`` and ``capture`` in front of a router listing 20,000 workers,
against the same router listing 2 (a script, not a test; issue 24 item 5).

A fake router on a real socket (``tests/support/fakerouter.py``) lists N workers: the first a
simulated server it forwards to, the rest a spy. Each verb runs as a fresh child process;
its peak RSS is the kernel's high-water mark (``wait4``). The 20,000-worker figure is
compared with the 2-worker one as a ratio (the cap is ``MAX_WORKERS``).

    python tests/benchmarks/bench_router_workers.py [--workers 20000] [--prompts 40]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from support.fakerouter import FakeRouter, Spy, many_workers, run_measured  # noqa: E402

from eagle_tui.core.sim.launcher import SimProcess  # noqa: E402
from eagle_tui.core.tokenizer import bundled_tokenizer_path  # noqa: E402

FAST = ["--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0"]


def measure(count: int, prompts: Path, sim: SimProcess, spy: Spy, work: Path) -> (
    tuple[float, float]
):
    env = {**os.environ, "EAGLE_TUI_STATE_DIR": str(work / "state")}
    cli = [sys.executable, "-m", "eagle_tui.tui.cli"]
    with FakeRouter(many_workers(count, sim.url, spy.url), sim.url) as router:
        _, _, _, status = run_measured([*cli, "status", "--once", "--url", router.url],
                                       env=env, cwd=str(ROOT), timeout=300, workdir=str(work))
        code, _, err, capture = run_measured(
            [*cli, "capture", "--display", "plain", "--prompts", str(prompts), "--out",
             str(work / f"out-{count}"), "--server", router.url, "--tokenizer",
             str(bundled_tokenizer_path()), "--max-new-tokens", "16", "--concurrency", "2"],
            env=env, cwd=str(ROOT), timeout=600, workdir=str(work))
    if code != 0:
        raise SystemExit(f"capture with {count} workers exited {code}: {err[-2000:]}")
    return status, capture


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=20_000)
    parser.add_argument("--prompts", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, SimProcess(FAST) as sim, Spy() as spy:
        work = Path(tmp)
        sim.wait_ready(60)
        prompts = work / "prompts.jsonl"
        prompts.write_text("".join(
            f'{{"id": "p{i:05d}", "messages": [{{"role": "user", "content": "q {i}"}}]}}\n'
            for i in range(args.prompts)))
        base = measure(2, prompts, sim, spy, work)
        huge = measure(args.workers, prompts, sim, spy, work)
    for verb, small, big in (("status --once", base[0], huge[0]),
                             ("capture", base[1], huge[1])):
        print(f"{verb:14} peak RSS: 2 workers {small:6.0f} MiB, {args.workers:,} workers "
              f"{big:6.0f} MiB (ratio {big / small:.2f})")


if __name__ == "__main__":
    main()

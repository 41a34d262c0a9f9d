"""Does multi-turn capture keep a server as busy as single-turn capture? (A script, not a test.)

A finite-capacity simulated server (``--capacity 64 --tokens-per-s 25``: 1,600 tokens/s) is
fed, in turn, by:

- a multi-turn batch (``--turns all --history model``): 4-turn chats, each turn sent when
  the previous one returns (its answer parsed from ids, the next prompt rendered);
- a single-turn batch of the same conversations' turns as separate records (each turn's
  dataset history), i.e. the same prompts and the same token volume.

Both run at the same concurrency; the server's own counter of generated tokens gives its
utilisation over a steady-state window. Each run is a fresh child process and a fresh sim.

    python tests/benchmarks/bench_multiturn.py [--conversations 600] [--warmup 5] [--window 20]
        [--repeats 2] [--concurrency N]...
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0"]
TPS, CAPACITY, TURNS = 25, 64, 4


def chat(i: int) -> list[dict[str, str]]:
    messages: list[dict[str, str]] = []
    for k in range(TURNS):
        messages.append({"role": "user", "content": f"conversation {i}, question {k}: "
                                                    + "tell me more " * ((i + k) % 9)})
        messages.append({"role": "assistant", "content": f"dataset answer {k}"})
    return messages


def write_prompts(work: Path, conversations: int) -> tuple[Path, Path]:
    """The multi-turn file, and the single-turn file holding each turn as its own record."""
    multi, single = work / "multi.jsonl", work / "single.jsonl"
    with multi.open("w") as many, single.open("w") as one:
        for i in range(conversations):
            messages = chat(i)
            many.write(json.dumps({"id": f"m{i:05d}", "messages": messages}) + "\n")
            for k in range(TURNS):
                one.write(json.dumps({"id": f"s{i:05d}-{k}",
                                      "messages": messages[: 2 * k + 1]}) + "\n")
    return multi, single


async def child(args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    from eagle_tui.core.capture.config import CaptureConfig
    from eagle_tui.core.capture.conversation import MultiTurn
    from eagle_tui.core.capture.engine import CaptureEngine
    from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer
    from eagle_tui.core.urls import ServerURL

    turns: Any = MultiTurn("model") if args.multi else {}
    config = CaptureConfig(prompts=Path(args.prompts), out_dir=Path(args.out),
                           servers=(ServerURL.parse(args.url),), tokenizer=bundled_tokenizer_path(),
                           max_new_tokens=400, concurrency=args.concurrency, stop_grace_s=0.0,
                           **({"turns": turns} if args.multi else {}))
    engine = CaptureEngine(config, tokenizer=load_tokenizer(bundled_tokenizer_path()))
    run = asyncio.ensure_future(engine.run())

    async def generated() -> tuple[float, int]:
        async with httpx.AsyncClient() as client:
            state = (await client.get(f"{args.url}/sim/state")).json()
        return time.perf_counter(), int(state["generation_tokens"])

    await asyncio.sleep(args.warmup)
    t0, g0 = await generated()
    done0 = engine.progress().counts.done
    await asyncio.sleep(args.window)
    t1, g1 = await generated()
    rows = engine.progress().counts.done - done0
    engine.stop(abort=True)
    await asyncio.gather(run, return_exceptions=True)
    return {"tokens_per_s": (g1 - g0) / (t1 - t0), "rows": rows, "window_s": t1 - t0,
            "turn_counts": engine.progress().ended_early}


def run_child(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "_child", *args], capture_output=True,
                          text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"child failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def ratio(shares: dict[str, float]) -> float:
    """Multi-turn's share over single-turn's (NaN when single-turn generated nothing, as in a
    window shorter than one answer)."""
    single = shares["single-turn"]
    return shares["multi-turn"] / single if single else float("nan")


def main() -> None:
    if sys.argv[1:2] == ["_child"]:
        parser = argparse.ArgumentParser()
        for name in ("--url", "--prompts", "--out"):
            parser.add_argument(name, required=True)
        parser.add_argument("--multi", action="store_true")
        parser.add_argument("--concurrency", type=int, required=True)
        parser.add_argument("--warmup", type=float, default=5.0)
        parser.add_argument("--window", type=float, default=20.0)
        print(json.dumps(asyncio.run(child(parser.parse_args(sys.argv[2:])))))
        return
    from eagle_tui.core.argtypes import OneLineParser, Whole, seconds
    from eagle_tui.core.sim.launcher import SimProcess

    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=Whole(1, 1_000_000), default=600)
    parser.add_argument("--warmup", type=seconds(zero=True, high=600), default=5.0)
    parser.add_argument("--window", type=seconds(high=3600), default=20.0)
    parser.add_argument("--repeats", type=Whole(1, 100), default=2)
    parser.add_argument("--concurrency", type=Whole(1, 100_000), action="append",
                        help=f"a concurrency to run at (repeatable; default {CAPACITY} and "
                             f"{CAPACITY * 3 // 2}: the capacity and half as much again)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        multi, single = write_prompts(work, args.conversations)
        print(f"== sim --capacity {CAPACITY} --tokens-per-s {TPS} (= {CAPACITY * TPS:,} "
              f"tokens/s), {TURNS}-turn chats vs the same turns as single-turn records, "
              f"{args.window:g} s steady-state window ==")
        for concurrency in args.concurrency or (CAPACITY, CAPACITY * 3 // 2):
            for repeat in range(args.repeats):
                shares = {}
                for name, prompts, flag in (("single-turn", single, []),
                                            ("multi-turn", multi, ["--multi"])):
                    with SimProcess([*FAST, "--tokens-per-s", str(TPS),
                                     "--capacity", str(CAPACITY)]) as sim:
                        sim.wait_ready(60)
                        r = run_child("--url", sim.url, "--prompts", str(prompts), "--out",
                                      str(work / f"out-{name}-{concurrency}-{repeat}"),
                                      "--concurrency", str(concurrency),
                                      "--warmup", str(args.warmup),
                                      "--window", str(args.window), *flag)
                    shares[name] = 100 * r["tokens_per_s"] / (CAPACITY * TPS)
                    print(f"  concurrency {concurrency:3d} run {repeat + 1} {name:11s} "
                          f"{r['tokens_per_s']:7,.0f} tokens/s = {shares[name]:5.1f}% of "
                          f"capacity ({r['rows']} rows in the window)")
                print(f"    multi-turn / single-turn: {ratio(shares):.3f}")


if __name__ == "__main__":
    main()

"""What does ``accept``'s replay cost the client, and does it keep a server busy? (A script.)

Prints, against the simulated speculative server (a separate process, ``--speculative-algorithm
EAGLE3``):

1. client cost: CPU-seconds per 1,000 requests of ``core.capture.replay`` (rendering, the
   capture's pool, sender and retries, acceptance per answer) and of a bare loop that only
   posts pre-rendered ids with httpx and reads the ``spec_*`` fields, in the sim's fastest
   mode, in the same run; the ratio (target: <= 1.5x, as for capture);
2. capacity: with a finite sim (``--capacity``, ``--tokens-per-s``), the share of the
   server's token capacity the replay reaches over a steady window (sim counters; target
   >= 97 %).

Each measurement runs in a fresh child process, so CPU is its own.

    python tests/benchmarks/bench_accept.py [--requests 2000] [--skip-capacity | --skip-cost]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

FAST = ["--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0", "--speculative-algorithm",
        "EAGLE3"]


def write_prompts(path: Path, count: int) -> None:
    with path.open("w") as handle:
        for i in range(count):
            record = {"id": f"a{i:07d}", "category": ("chat", "math", "code")[i % 3],
                      "messages": [{"role": "user",
                                    "content": f"Question {i}: " + "tell me more " * (i % 20)}]}
            handle.write(json.dumps(record) + "\n")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def child_replay(args: argparse.Namespace) -> dict[str, Any]:
    from eagle_tui.core.accept.summary import report
    from eagle_tui.core.capture.replay import ReplaySettings, replay
    from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer
    from eagle_tui.core.urls import ServerURL

    tokenizer = load_tokenizer(bundled_tokenizer_path())
    settings = ReplaySettings(prompts=Path(args.prompts), tokenizer=bundled_tokenizer_path(),
                              server=ServerURL.parse(args.url), max_new_tokens=args.max_new_tokens,
                              concurrency=args.concurrency)
    cpu, wall = cpu_seconds(), time.perf_counter()
    run = await replay(settings, tokenizer=tokenizer)
    summary = report(run.requests)
    cpu, wall = cpu_seconds() - cpu, time.perf_counter() - wall
    return {"requests": len(run.requests), "failed": len(run.failures), "cpu": cpu,
            "wall": wall, "accept_length": summary.overall.accept_length}


async def child_bare(args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    from eagle_tui.core.capture.prompts import PromptRecord, open_prompts
    from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer

    tokenizer = load_tokenizer(bundled_tokenizer_path())
    prompts = [tokenizer.render(r.messages, r.tools) for r in open_prompts(Path(args.prompts))
               if isinstance(r, PromptRecord)]
    limits = httpx.Limits(max_connections=args.concurrency,
                          max_keepalive_connections=args.concurrency)
    sampling = {"max_new_tokens": args.max_new_tokens, "temperature": 0.0}
    queue = iter(prompts)
    sums = [0, 0]

    async def worker(client: httpx.AsyncClient) -> None:
        for ids in queue:
            body = {"input_ids": ids, "sampling_params": sampling}
            meta = (await client.post("/generate", json=body)).json()["meta_info"]
            sums[0] += meta["completion_tokens"]
            sums[1] += meta.get("spec_verify_ct", 0)

    transport = None
    if args.lean:  # the capture's own transport: the best bare loop measured (issue 23)
        from eagle_tui.core.sglang.transport import LeanTransport

        transport = LeanTransport(max_connections=args.concurrency)
    async with httpx.AsyncClient(base_url=args.url, limits=limits, timeout=600,
                                 transport=transport) as client:
        cpu, wall = cpu_seconds(), time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(args.concurrency)))
        cpu, wall = cpu_seconds() - cpu, time.perf_counter() - wall
    return {"requests": len(prompts), "cpu": cpu, "wall": wall,
            "accept_length": sums[0] / sums[1] if sums[1] else None}


async def child_capacity(args: argparse.Namespace) -> dict[str, Any]:
    """Server-side tokens/s over a steady window while the replay runs."""
    import httpx

    run = asyncio.ensure_future(child_bare(args) if args.bare else child_replay(args))

    async def generated() -> tuple[float, int]:
        async with httpx.AsyncClient(timeout=120) as client:  # the sim is saturated
            state = (await client.get(f"{args.url}/sim/state")).json()
        return time.perf_counter(), int(state["generation_tokens"])

    deadline = time.perf_counter() + 300
    _, before = await generated()  # the start-up warm-up request's tokens
    while (await generated())[1] == before and time.perf_counter() < deadline:
        await asyncio.sleep(0.2)  # rendering and admission first: the window starts after
    await asyncio.sleep(args.warmup)
    t0, g0 = await generated()
    await asyncio.sleep(args.window)
    t1, g1 = await generated()
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    return {"tokens_per_s": (g1 - g0) / (t1 - t0), "window_s": t1 - t0}


CHILDREN = {"replay": child_replay, "bare": child_bare, "capacity": child_capacity}


def child_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=CHILDREN)
    parser.add_argument("--url", required=True)
    parser.add_argument("--prompts", required=True)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--warmup", type=float, default=4.0)
    parser.add_argument("--window", type=float, default=15.0)
    parser.add_argument("--bare", action="store_true")
    parser.add_argument("--lean", action="store_true")
    args = parser.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.ERROR)
    print(json.dumps(asyncio.run(CHILDREN[args.mode](args))))


def run_child(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "_child", *args], capture_output=True,
                          text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"child {args[0]} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def client_cost(work: Path, requests: int, max_new: int) -> float:
    """Prints both rows and returns the ratio replay / bare."""
    from eagle_tui.core.sim.launcher import SimProcess

    prompts = work / "cost.jsonl"
    write_prompts(prompts, requests)
    print(f"== 1. client cost: {requests} requests, {max_new}-token outputs, concurrency 64, "
          "fastest speculative sim ==")
    rows = {}
    for name, mode in [("accept replay", ["replay"]), ("bare loop", ["bare"]),
                       ("bare loop lean", ["bare", "--lean"])]:
        with SimProcess(FAST) as sim:  # a fresh sim each
            sim.wait_ready(60)
            rows[name] = run_child(*mode, "--url", sim.url, "--prompts", str(prompts),
                                   "--max-new-tokens", str(max_new))
    for name, r in rows.items():
        print(f"  {name:14s} {r['requests'] / r['wall']:8.1f} requests/s  "
              f"{1000 * r['cpu'] / r['requests']:6.2f} CPU-s per 1,000 requests  "
              f"(wall {r['wall']:.1f} s, accept length {r['accept_length']:.3f})")
    def per_request(name: str) -> float:
        return float(rows[name]["cpu"] / rows[name]["requests"])

    ratio = per_request("accept replay") / per_request("bare loop")
    print(f"  CPU per request, accept replay / bare httpx loop: {ratio:.2f}x (target <= 1.5x)")
    lean = per_request("accept replay") / per_request("bare loop lean")
    print(f"  CPU per request, accept replay / bare loop on the capture's transport: {lean:.2f}x")
    return ratio


def capacity(work: Path) -> float:
    """Prints the replay's and a bare loop's steady tokens/s on a finite sim; returns the
    replay's share of what the bare loop (which saturates the server) gets."""
    from eagle_tui.core.sim.launcher import SimProcess

    tps, cap, max_new, concurrency = 25, 64, 128, 96
    prompts = work / "capacity.jsonl"
    write_prompts(prompts, 5000)
    args = [*FAST, "--tokens-per-s", str(tps), "--capacity", str(cap)]
    print(f"== 2. capacity: sim --capacity {cap} --tokens-per-s {tps}, {max_new}-token "
          f"outputs, concurrency {concurrency} (> capacity: the server is the limit), "
          "15 s steady window ==")
    rates = {}
    for name, extra in [("accept replay", []), ("bare loop", ["--bare"])]:
        with SimProcess(args) as sim:
            sim.wait_ready(60)
            rates[name] = run_child("capacity", "--url", sim.url, "--prompts", str(prompts),
                                    "--max-new-tokens", str(max_new), "--concurrency",
                                    str(concurrency), *extra)["tokens_per_s"]
        print(f"  {name:14s} {rates[name]:8,.0f} tokens/s")
    share = rates["accept replay"] / rates["bare loop"]
    print(f"  accept replay reaches {100 * share:.1f}% of what the bare loop gets from the "
          "same finite server (target >= 97%)")
    return share


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--skip-capacity", action="store_true")
    parser.add_argument("--skip-cost", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-accept-") as tmp:
        if not args.skip_cost:
            client_cost(Path(tmp), args.requests, args.max_new_tokens)
        if not args.skip_capacity:
            capacity(Path(tmp))


if __name__ == "__main__":
    main()

"""How many servers can one capture process feed? (A script, not a test.)

One capture process against 16 simulated servers of finite capacity (``--capacity`` requests
at once, ``--tokens-per-s`` each), first directly (16 ``--server``) and then through SGLang's
router (``sglang-router``, round robin) in front of the same 16. In a steady-state window it
prints samples/s, the capture process's CPU per sample (the router's too), and the share of
the servers' capacity achieved (generated tokens counted by the sims themselves).

    python tests/benchmarks/bench_scaleout.py [--servers 16] [--capacity 8]
        [--tokens-per-s 64] [--max-new-tokens 128] [--warmup 6] [--window 20]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from bench_capture import capture_config, write_prompts  # noqa: E402
from support.router import RouterProcess  # noqa: E402

from eagle_tui.core.capture.engine import CaptureEngine  # noqa: E402
from eagle_tui.core.sim.launcher import SimProcess  # noqa: E402
from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer  # noqa: E402

ROUTER_FLAGS = ("--policy", "round_robin", "--disable-circuit-breaker",
                "--health-check-interval-secs", "5", "--log-level", "warn")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def generated(sims: list[SimProcess]) -> int:
    """Tokens the sims have generated so far (their own counters)."""
    async with httpx.AsyncClient() as client:
        states = await asyncio.gather(*(client.get(f"{s.url}/sim/state") for s in sims))
    return sum(int(state.json()["generation_tokens"]) for state in states)


async def measure(name: str, urls: list[str], sims: list[SimProcess], args: argparse.Namespace,
                  work: Path, router: psutil.Process | None) -> dict[str, Any]:
    config = capture_config(work / "prompts.jsonl", work / f"out-{name}", urls,
                            max_new_tokens=args.max_new_tokens, concurrency=args.capacity,
                            extra_sampling={"ignore_eos": True}, stop_grace_s=0.0,
                            health_interval_s=5.0)
    engine = CaptureEngine(config, tokenizer=load_tokenizer(bundled_tokenizer_path()))
    run = asyncio.ensure_future(engine.run())
    await asyncio.sleep(args.warmup)
    t0, cpu0, done0, tokens0 = time.perf_counter(), cpu_seconds(), engine.progress().counts.done, \
        await generated(sims)
    router_cpu0 = _cpu(router)
    await asyncio.sleep(args.window)
    t1, cpu1, done1, tokens1 = time.perf_counter(), cpu_seconds(), engine.progress().counts.done, \
        await generated(sims)
    router_cpu1 = _cpu(router)
    engine.stop(abort=True)
    await asyncio.gather(run, return_exceptions=True)
    samples = done1 - done0
    capacity = len(sims) * args.capacity * args.tokens_per_s
    return {
        "samples_per_s": samples / (t1 - t0),
        "client_cpu_ms_per_sample": 1000 * (cpu1 - cpu0) / max(samples, 1),
        "client_cpu_share": (cpu1 - cpu0) / (t1 - t0),
        "router_cpu_ms_per_sample": (1000 * (router_cpu1 - router_cpu0) / max(samples, 1)
                                     if router is not None else None),
        "capacity_share": (tokens1 - tokens0) / (t1 - t0) / capacity,
    }


def _cpu(process: psutil.Process | None) -> float:
    if process is None:
        return 0.0
    times = process.cpu_times()
    return float(times.user + times.system)


def show(name: str, r: dict[str, Any]) -> None:
    router = (f", router {r['router_cpu_ms_per_sample']:.2f} ms CPU/sample"
              if r["router_cpu_ms_per_sample"] is not None else "")
    print(f"{name:>8}: {r['samples_per_s']:6.1f} samples/s, client "
          f"{r['client_cpu_ms_per_sample']:.2f} ms CPU/sample "
          f"({100 * r['client_cpu_share']:.0f}% of a core){router}, "
          f"{100 * r['capacity_share']:.1f}% of the servers' capacity")


async def main(args: argparse.Namespace) -> None:
    sim_args = ["--time-scale", "0", "--ttft", "0", "--capacity", str(args.capacity),
                "--tokens-per-s", str(args.tokens_per_s)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        per_s = args.capacity * args.tokens_per_s / args.max_new_tokens
        write_prompts(work / "prompts.jsonl", int(args.servers * per_s * 3 * (
            args.warmup + args.window)) + 1000)
        sims = [SimProcess(sim_args).start() for _ in range(args.servers)]
        try:
            for sim in sims:
                sim.wait_ready(120)
            print(f"{args.servers} sims: --capacity {args.capacity} --tokens-per-s "
                  f"{args.tokens_per_s}, {args.max_new_tokens}-token outputs: "
                  f"{args.servers * per_s:.0f} samples/s at most")
            show("direct", await measure("direct", [s.url for s in sims], sims, args, work,
                                         None))
            with RouterProcess([s.url for s in sims], flags=ROUTER_FLAGS) as router:
                router.wait_workers(args.servers, timeout=120)
                assert router._process is not None
                process = psutil.Process(router._process.pid)
                show("router", await measure("router", [router.url], sims, args, work,
                                             process))
        finally:
            for sim in sims:
                sim.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=16)
    parser.add_argument("--capacity", type=int, default=8)
    parser.add_argument("--tokens-per-s", type=float, default=64.0)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--warmup", type=float, default=6.0)
    parser.add_argument("--window", type=float, default=20.0)
    asyncio.run(main(parser.parse_args()))

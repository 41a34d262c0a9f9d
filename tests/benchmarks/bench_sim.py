"""How fast is the simulated SGLang server in its fastest mode? (A script, not a test.)

Starts ``python -m eagle_tui.core.sim --time-scale 0 --tokens-per-s 0 --ttft 0`` and measures,
for 1, 16 and 64 concurrent clients, requests/s of short non-streaming generations
(32 output tokens) and of a trivial route of the same server (``GET /v1/models``),
the baseline of what the HTTP stack itself allows. Prints both and their ratio.

    python tests/benchmarks/bench_sim.py [--seconds 3] [--tokens 32]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from eagle_tui.core.sim.launcher import SimProcess

FAST = ["--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0"]
PROMPT = [163587, 2482, 163601, 1200, 1300, 1400, 163586, 163588, 3702, 163601, 163606]


Call = Callable[[httpx.AsyncClient], Awaitable[int]]


async def rate(concurrency: int, seconds: float, call: Call, url: str) -> tuple[float, int]:
    """Requests/s and tokens produced by ``concurrency`` workers calling ``call``."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        for _ in range(min(concurrency, 8)):  # warm connections and caches
            await call(client)
        done = 0
        tokens = 0
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal done, tokens
            while time.perf_counter() < deadline:
                produced = await call(client)  # add after the await: workers interleave
                tokens += produced
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return done / (time.perf_counter() - started), tokens


def generate_call(max_new_tokens: int) -> Call:
    body = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": max_new_tokens,
                                                     "ignore_eos": True, "temperature": 0}}

    async def call(client: httpx.AsyncClient) -> int:
        response = await client.post("/generate", json=body)
        response.raise_for_status()
        completion: int = response.json()["meta_info"]["completion_tokens"]
        return completion

    return call


async def models_call(client: httpx.AsyncClient) -> int:
    (await client.get("/v1/models")).raise_for_status()
    return 0


async def run(seconds: float, max_new_tokens: int) -> None:
    with SimProcess(FAST) as sim:
        started = time.perf_counter()
        await sim.wait_ready_async(timeout=60)
        print(f"sim ready in {time.perf_counter() - started:.2f} s (--time-scale 0)")
        print(f"{'clients':>7} {'/v1/models req/s':>17} {'/generate req/s':>16} "
              f"{'tokens/s':>10} {'ratio':>6}")
        for concurrency in (1, 16, 64):
            baseline, _ = await rate(concurrency, seconds, models_call, sim.url)
            generate_rate, tokens = await rate(concurrency, seconds, generate_call(max_new_tokens),
                                               sim.url)
            print(f"{concurrency:>7} {baseline:>17.0f} {generate_rate:>16.0f} "
                  f"{tokens / seconds:>10.0f} {generate_rate / baseline:>6.2f}")


def main() -> None:
    """Parse flags and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--tokens", type=int, default=32, help="max_new_tokens per request")
    args = parser.parse_args()
    asyncio.run(run(args.seconds, args.tokens))


if __name__ == "__main__":
    main()

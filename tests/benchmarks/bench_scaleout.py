"""How many servers can one capture process feed? (A script, not a test.)

One capture process against 16 simulated servers of finite capacity (``--capacity`` requests
at once, ``--tokens-per-s`` each), in the same run: directly (16 ``--server``), through
SGLang's router (``sglang-router``, round robin) in front of the same 16, and a bare loop
(httpx on the capture's lean transport: ``--capacity`` requests in flight on each server, in
pools of at most 8 connections, the same ``/generate`` bodies pre-rendered, answers discarded),
the reference of what a client can reach on this machine. Over a steady-state window each
prints samples/s, the client's CPU per sample (the router's too), the share of the servers'
token capacity achieved (generated tokens counted by the sims themselves), and the CPU the
sims and the whole machine used; then it says what the limit was: the client (the bare loop
saturates the servers and the capture does not), the machine (the bare loop falls short
too while every core is busy, the sims' CPU included), or the round trip between answers (the
bare loop falls short with cores to spare).

    python tests/benchmarks/bench_scaleout.py [--servers 16] [--capacity 8]
        [--tokens-per-s 64] [--max-new-tokens 128] [--warmup 6] [--window 20]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from bench_capture import capture_config, write_prompts  # noqa: E402
from support.router import RouterProcess  # noqa: E402

from eagle_tui.core.argtypes import Number, OneLineParser, Whole, seconds  # noqa: E402
from eagle_tui.core.capture.engine import CaptureEngine  # noqa: E402
from eagle_tui.core.capture.prompts import PromptRecord, open_prompts  # noqa: E402
from eagle_tui.core.sglang.transport import LeanTransport  # noqa: E402
from eagle_tui.core.sim.launcher import SimProcess  # noqa: E402
from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer  # noqa: E402

ROUTER_FLAGS = ("--policy", "round_robin", "--disable-circuit-breaker",
                "--health-check-interval-secs", "5", "--log-level", "warn")
SATURATED = 0.97
"""A share of the servers' capacity at or above which the servers, not the client, limit."""
POOL = 8
BUSY = 0.9
"""The share of the machine's cores busy at or above which the machine is the limit."""


@dataclass(frozen=True)
class Load:
    """Something sending requests: how to stop it and how many samples it has finished."""

    task: asyncio.Future[Any]
    stop: Callable[[], None]
    done: Callable[[], int]


@dataclass(frozen=True)
class Reading:
    """Counters read at one instant."""

    at: float
    client_cpu: float
    done: int
    tokens: int
    sims_cpu: float
    router_cpu: float
    machine_busy: float


@dataclass(frozen=True)
class Window:
    """What one way of sending achieved between two readings."""

    seconds: float
    samples: int
    client_cpu: float
    tokens_per_s: float
    capacity_share: float
    sims_cores: float
    router_cpu: float | None
    machine_cores: float

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds

    @property
    def others_cores(self) -> float:
        """Cores busy with neither the sims, the client nor the router (other work)."""
        ours = self.sims_cores + (self.client_cpu + (self.router_cpu or 0.0)) / self.seconds
        return max(0.0, self.machine_cores - ours)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def process_cpu(processes: list[psutil.Process]) -> float:
    """User + system seconds of ``processes`` so far."""
    return sum(float(times.user + times.system) for times in (p.cpu_times() for p in processes))


def machine_busy() -> float:
    """Seconds every core of the machine has spent not idle (all processes, ours or not)."""
    times = psutil.cpu_times()
    return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))


async def generated(sims: list[SimProcess]) -> int:
    """Tokens the sims have generated so far (their own counters)."""
    async with httpx.AsyncClient() as client:
        states = await asyncio.gather(*(client.get(f"{s.url}/sim/state") for s in sims))
    return sum(int(state.json()["generation_tokens"]) for state in states)


async def read(load: Load, sims: list[SimProcess], sim_processes: list[psutil.Process],
               router: list[psutil.Process]) -> Reading:
    tokens = await generated(sims)
    return Reading(time.perf_counter(), cpu_seconds(), load.done(), tokens,
                   process_cpu(sim_processes), process_cpu(router), machine_busy())


def window(first: Reading, last: Reading, capacity: float, routed: bool) -> Window:
    spent = last.at - first.at
    samples = last.done - first.done
    tokens_per_s = (last.tokens - first.tokens) / spent
    return Window(spent, samples, last.client_cpu - first.client_cpu, tokens_per_s,
                  tokens_per_s / capacity, (last.sims_cpu - first.sims_cpu) / spent,
                  last.router_cpu - first.router_cpu if routed else None,
                  (last.machine_busy - first.machine_busy) / spent)


def engine_load(name: str, urls: list[str], args: argparse.Namespace, work: Path) -> Load:
    config = capture_config(work / "prompts.jsonl", work / f"out-{name}", urls,
                            max_new_tokens=args.max_new_tokens, concurrency=args.capacity,
                            extra_sampling={"ignore_eos": True}, stop_grace_s=0.0,
                            health_interval_s=5.0)
    engine = CaptureEngine(config, tokenizer=load_tokenizer(bundled_tokenizer_path()))
    task = asyncio.ensure_future(engine.run())
    return Load(task, lambda: engine.stop(abort=True), lambda: engine.progress().counts.done)


def bare_load(urls: list[str], bodies: Iterator[dict[str, Any]], per_server: int) -> Load:
    """``per_server`` plain loops per server, posting the next body and discarding the
    answer; each loop keeps to one pool of at most POOL connections on the capture's own
    ``LeanTransport`` (the cheapest bare loop of bench_capture_ab: a large pool costs more
    CPU per request, and httpcore's pool more than the lean one)."""
    finished = [0]
    size = min(per_server, POOL)
    pools = -(-per_server // size)
    clients = [httpx.AsyncClient(base_url=url, timeout=600,
                                 transport=LeanTransport(max_connections=size))
               for url in urls for _ in range(pools)]

    async def loop(client: httpx.AsyncClient) -> None:
        for body in bodies:
            response = await client.post("/generate", json=body)
            await response.aread()
            finished[0] += 1

    async def run() -> None:
        try:
            await asyncio.gather(*(loop(clients[server * pools + j // size])
                                   for server in range(len(urls)) for j in range(per_server)))
        finally:
            await asyncio.gather(*(c.aclose() for c in clients))

    task = asyncio.ensure_future(run())
    return Load(task, task.cancel, lambda: finished[0])


def rendered_prompts(prompts: Path, count: int) -> list[list[int]]:
    """The first ``count`` prompts rendered as the capture renders them."""
    tokenizer = load_tokenizer(bundled_tokenizer_path())
    return [tokenizer.render(record.messages, record.tools)
            for record in itertools.islice(open_prompts(prompts), count)
            if isinstance(record, PromptRecord)]


def bare_bodies(rendered: list[list[int]], max_new_tokens: int) -> Iterator[dict[str, Any]]:
    """``/generate`` bodies of ``rendered`` round and round (a repeated prompt costs a sim
    no less: ``ignore_eos`` runs every answer to its end)."""
    sampling = {"max_new_tokens": max_new_tokens, "ignore_eos": True, "temperature": 1.0,
                "skip_special_tokens": False, "no_stop_trim": True}
    for index, ids in enumerate(itertools.cycle(rendered)):
        yield {"input_ids": ids, "sampling_params": sampling, "stream": False,
               "rid": f"bare-{index:012d}"}


async def measure(start: Callable[[], Load], sims: list[SimProcess], args: argparse.Namespace,
                  router: psutil.Process | None = None) -> Window:
    sim_processes = [psutil.Process(sim.pid) for sim in sims]
    routers = [router] if router is not None else []
    load = start()
    await asyncio.sleep(args.warmup)
    first = await read(load, sims, sim_processes, routers)
    await asyncio.sleep(args.window)
    last = await read(load, sims, sim_processes, routers)
    load.stop()
    await asyncio.gather(load.task, return_exceptions=True)
    return window(first, last, len(sims) * args.capacity * args.tokens_per_s, router is not None)


def show(name: str, w: Window) -> None:
    router = (f", router {1000 * w.router_cpu / max(w.samples, 1):.2f} ms CPU/sample"
              if w.router_cpu is not None else "")
    print(f"{name:>9}: {w.samples_per_s:6.1f} samples/s, client "
          f"{1000 * w.client_cpu / max(w.samples, 1):.2f} ms CPU/sample "
          f"({100 * w.client_cpu / w.seconds:.0f}% of a core){router}, "
          f"{100 * w.capacity_share:.1f}% of the servers' capacity; machine busy "
          f"{w.machine_cores:.2f} of {os.cpu_count()} cores (sims {w.sims_cores:.2f}, "
          f"other processes {w.others_cores:.2f})", flush=True)


def limit(results: dict[str, Window]) -> str:
    """What limited this run, judged by the bare loop: the client (the bare loop saturates
    the servers and the capture is behind), the machine (every core busy), or neither."""
    bare = results["bare loop"]
    cores = os.cpu_count() or 1
    gaps = ", ".join(f"{name} {100 * (bare.capacity_share - w.capacity_share):+.1f}"
                     for name, w in results.items() if w is not bare)
    behind = f"points behind the bare loop: {gaps}"
    if bare.capacity_share >= SATURATED:
        return f"limit: the client (the bare loop saturates the servers); {behind}"
    if bare.machine_cores >= BUSY * cores:
        return (f"limit: the machine (the bare loop reached only "
                f"{100 * bare.capacity_share:.1f}% with {bare.machine_cores:.2f} of {cores} "
                f"cores busy: the sims {bare.sims_cores:.2f}, other processes "
                f"{bare.others_cores:.2f}); {behind}")
    return (f"limit: the round trip between answers (even the bare loop, the cheapest client, "
            f"reached only {100 * bare.capacity_share:.1f}% with cores to spare: each slot "
            f"idles one round trip per answer, less of a longer answer); {behind}")


async def sweep(sims: list[SimProcess], args: argparse.Namespace, work: Path) -> None:
    urls = [s.url for s in sims]
    expected = len(sims) * args.capacity * args.tokens_per_s / args.max_new_tokens
    bodies = bare_bodies(rendered_prompts(work / "prompts.jsonl", max(64, int(expected * 4))),
                         args.max_new_tokens)
    results = {
        "direct": await measure(lambda: engine_load("direct", urls, args, work), sims, args),
        "bare loop": await measure(lambda: bare_load(urls, bodies, args.capacity), sims, args),
    }
    show("direct", results["direct"])
    show("bare loop", results["bare loop"])
    with RouterProcess(urls, flags=ROUTER_FLAGS) as router:
        router.wait_workers(len(sims), timeout=120)
        results["router"] = await measure(
            lambda: engine_load("router", [router.url], args, work), sims, args,
            psutil.Process(router.pid))
    show("router", results["router"])
    print(limit(results))


def sim_args(args: argparse.Namespace) -> list[str]:
    return ["--time-scale", "0", "--ttft", "0", "--capacity", str(args.capacity),
            "--tokens-per-s", f"{args.tokens_per_s:g}"]


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        per_s = args.capacity * args.tokens_per_s / args.max_new_tokens
        write_prompts(work / "prompts.jsonl", int(args.servers * per_s * 3 * (
            args.warmup + args.window)) + 1000)
        sims = [SimProcess(sim_args(args)).start() for _ in range(args.servers)]
        try:
            for sim in sims:
                await sim.wait_ready_async(120)
            print(f"{args.servers} sims: {' '.join(sim_args(args))}, {args.max_new_tokens}-token"
                  f" outputs: {args.servers * per_s:.0f} samples/s at most; "
                  f"{args.warmup:g} s warm-up, {args.window:g} s window", flush=True)
            await sweep(sims, args, work)
        finally:
            for sim in sims:
                sim.close()


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--servers", type=Whole(1, 64), default=16)
    parser.add_argument("--capacity", type=Whole(1, 256), default=8,
                        help="requests each sim runs at full speed; also the concurrency")
    parser.add_argument("--tokens-per-s", type=Number(0, 1e5, above=True), default=64.0)
    parser.add_argument("--max-new-tokens", type=Whole(1, 8192), default=128)
    parser.add_argument("--warmup", type=seconds(zero=True, high=600), default=6.0)
    parser.add_argument("--window", type=seconds(high=3600), default=20.0)
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse()))

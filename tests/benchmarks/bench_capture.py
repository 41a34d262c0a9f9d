"""What does the capture engine cost, and can it keep a server busy? (A script, not a test.)

Prints, against the simulated server (a separate process):

1. throughput: samples/s and client CPU-seconds per 1,000 samples in the sim's fastest mode
   with 1,024-token outputs at concurrency 256, for the capture engine and for bare loops
   that only post pre-tokenized ids and discard the answer (httpx with one connection pool
   of 256 and with 32 pools of 8 like the engine uses; the same 32 pools on the capture's
   lean transport and on aiohttp, ``BARE_CLIENTS``), and the ratios (``bench_capture_ab.py``
   also runs ``minimal``: a bare loop that renders, decodes and writes the rows, the least
   a capture can do);
2. rendering: chat-template rendering cost per prompt (it runs in a thread beside
   dispatch) against the dispatch rate it has to feed;
3. capacity: with a finite-capacity sim (``--capacity``, ``--tokens-per-s``), the share
   of the server's token capacity the capture achieves in steady state (sim counters);
4. memory: peak RSS of a capture of 100,000 samples, and RSS along the way.

Each measurement runs in a fresh child process so CPU and RSS are its own.

    python tests/benchmarks/bench_capture.py [--samples 3000] [--rss-samples 100000]
                                             [--skip-rss] [--skip-capacity]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
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

FAST = ["--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0"]


# -- helpers shared by parent and children ------------------------------------------------


def write_prompts(path: Path, count: int) -> None:
    """Single-turn prompts of varied length; every 7th declares a tool."""
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}}}}
    with path.open("w") as handle:
        for i in range(count):
            record: dict[str, Any] = {"id": f"b{i:07d}", "messages": [
                {"role": "user", "content": f"Question {i}: " + "tell me more " * (i % 20)}]}
            if i % 7 == 0:
                record["tools"] = [tool]
            handle.write(json.dumps(record) + "\n")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def capture_config(prompts: Path, out: Path, urls: list[str], **kwargs: Any) -> Any:
    from eagle_tui.core.capture.config import CaptureConfig
    from eagle_tui.core.tokenizer import bundled_tokenizer_path
    from eagle_tui.core.urls import ServerURL

    return CaptureConfig(prompts=prompts, out_dir=out,
                         servers=tuple(ServerURL.parse(url) for url in urls),
                         tokenizer=bundled_tokenizer_path(), **kwargs)


def counts_of(progress: Any) -> Any:
    """The counters of an engine snapshot: ``progress.counts`` since issue 18, the snapshot
    itself before (``bench_capture_ab.py`` runs these children against older commits too)."""
    return getattr(progress, "counts", progress)


# -- children: each prints one JSON line ------------------------------------------------


async def child_capture(args: argparse.Namespace) -> dict[str, Any]:
    from eagle_tui.core.capture.engine import CaptureEngine
    from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer

    tokenizer = load_tokenizer(bundled_tokenizer_path())
    config = capture_config(Path(args.prompts), Path(args.out), args.url,
                            max_new_tokens=args.max_new_tokens, concurrency=args.concurrency,
                            extra_sampling={"ignore_eos": True}, shard_rows=5000)
    engine = CaptureEngine(config, tokenizer=tokenizer)
    cpu, wall = cpu_seconds(), time.perf_counter()
    summary = await engine.run()
    cpu, wall = cpu_seconds() - cpu, time.perf_counter() - wall
    p = counts_of(summary.progress)
    return {"samples": p.done, "tokens": p.output_tokens, "wall": wall, "cpu": cpu,
            "failed": p.failed, "rss_mb": rss_mb()}


BARE_CLIENTS = ("httpx", "lean", "aiohttp")
"""The bare loop's HTTP clients: httpx with its default transport (httpcore), httpx over the
capture's own ``LeanTransport``, and aiohttp (its C HTTP parser; installed with the test
extras, as sglang-router's dependency)."""


async def child_bare(args: argparse.Namespace) -> dict[str, Any]:
    from eagle_tui.core.capture.prompts import PromptRecord, open_prompts
    from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer

    tokenizer = load_tokenizer(bundled_tokenizer_path())
    prompts = [tokenizer.render(r.messages, r.tools) for r in open_prompts(Path(args.prompts))
               if isinstance(r, PromptRecord)]
    pools = max(1, args.pools)
    per_pool = max(1, args.concurrency // pools)
    post, close, transient = bare_client(args.client, args.url[0], pools, per_pool)
    sampling = {"max_new_tokens": args.max_new_tokens, "ignore_eos": True,
                "temperature": 1.0, "skip_special_tokens": False, "no_stop_trim": True}
    queue = iter(enumerate(prompts))
    retried = 0

    async def worker(pool: int) -> None:
        nonlocal retried
        for index, ids in queue:
            body = {"input_ids": ids, "sampling_params": sampling, "stream": False,
                    "rid": f"bare-{index:012d}"}
            _, resent = await post_resending(post, pool, body, transient)  # answer discarded
            retried += resent

    cpu, wall = cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(worker(i % pools) for i in range(args.concurrency)))
    cpu, wall = cpu_seconds() - cpu, time.perf_counter() - wall
    await close()
    return {"samples": len(prompts), "wall": wall, "cpu": cpu, "retried": retried}


async def post_resending(post: Any, pool: int, body: dict[str, Any],
                         transient: Any, attempts: int = 5) -> tuple[bytes, int]:
    """The answer to ``body`` and how many times it was sent again: a burst of new
    connections is sometimes reset. The last error is raised after ``attempts``, so a loop
    never counts a sample it did not get."""
    for resent in range(attempts):
        try:
            return await post(pool, body), resent
        except transient:
            if resent == attempts - 1:
                raise
    raise AssertionError("unreachable")


def bare_client(kind: str, url: str, pools: int, per_pool: int) -> tuple[Any, Any, Any]:
    """``(post(pool, body), close(), transient errors)`` for one of BARE_CLIENTS."""
    if kind == "aiohttp":
        import aiohttp

        sessions = [aiohttp.ClientSession(
            base_url=url, connector=aiohttp.TCPConnector(limit=per_pool),
            timeout=aiohttp.ClientTimeout(total=600)) for _ in range(pools)]

        async def post_aiohttp(pool: int, body: dict[str, Any]) -> bytes:
            async with sessions[pool].post("/generate", json=body) as response:
                return await response.read()

        async def close_aiohttp() -> None:
            for session in sessions:
                await session.close()

        return post_aiohttp, close_aiohttp, aiohttp.ClientConnectionError
    import httpx

    def transport() -> Any:
        if kind == "httpx":
            return None
        from eagle_tui.core.sglang.transport import LeanTransport

        return LeanTransport(max_connections=per_pool)

    limits = httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool)
    clients = [httpx.AsyncClient(base_url=url, limits=limits, timeout=600,
                                 transport=transport()) for _ in range(pools)]

    async def post_httpx(pool: int, body: dict[str, Any]) -> bytes:
        response = await clients[pool].post("/generate", json=body)
        return await response.aread()

    async def close_httpx() -> None:
        for client in clients:
            await client.aclose()

    return post_httpx, close_httpx, httpx.TransportError


async def child_minimal(args: argparse.Namespace) -> dict[str, Any]:
    """The least a capture must do on top of a bare loop, timed with it: render every prompt
    with the chat template, decode each JSON answer, keep prompt + output ids as a row and
    write the rows to zstd parquet shards. No validation, retries, events or progress: the
    floor under the capture engine's CPU per sample with the same HTTP client."""
    from array import array
    from datetime import UTC, datetime

    import msgspec

    from eagle_tui.core.capture.prompts import PromptRecord, open_prompts
    from eagle_tui.core.shards.manifest import Manifest
    from eagle_tui.core.shards.schema import ShardMetadata, ShardRow
    from eagle_tui.core.shards.writer import ShardWriter
    from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer

    class Answer(msgspec.Struct):
        output_ids: tuple[int, ...]  # the rest of the answer is skipped, never built

    decode = msgspec.json.Decoder(Answer).decode
    tokenizer = load_tokenizer(bundled_tokenizer_path())
    records = [r for r in open_prompts(Path(args.prompts)) if isinstance(r, PromptRecord)]
    out = Path(args.out)
    out.mkdir(parents=True)
    manifest = Manifest(out, minimal_batch_config(Path(args.prompts), args.max_new_tokens))
    manifest.save_atomic()
    writer = ShardWriter(out, metadata=ShardMetadata(), manifest=manifest, max_rows=5000)
    pools = max(1, args.pools)
    post, close, transient = bare_client(args.client, args.url[0], pools,
                                         max(1, args.concurrency // pools))
    sampling = {"max_new_tokens": args.max_new_tokens, "ignore_eos": True,
                "temperature": 1.0, "skip_special_tokens": False, "no_stop_trim": True}
    queue = iter(enumerate(records))

    async def worker(pool: int) -> None:
        for index, record in queue:
            ids = tokenizer.render(record.messages, record.tools)
            body = {"input_ids": ids, "sampling_params": sampling, "stream": False,
                    "rid": f"min-{index:012d}"}
            answer = decode((await post_resending(post, pool, body, transient))[0])
            row_ids = array("i", ids)
            row_ids.extend(array("i", answer.output_ids))
            writer.add(ShardRow(
                sample_id=record.sample_id, input_ids=row_ids, prompt_len=len(ids),
                finish_reason="length", matched_stop=None, think_end=-1, flags=[],
                endpoint=args.url[0], rid=body["rid"], latency_s=0.0,
                created_at=datetime.now(UTC)))

    cpu, wall = cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(worker(i % pools) for i in range(args.concurrency)))
    writer.close()
    cpu, wall = cpu_seconds() - cpu, time.perf_counter() - wall
    await close()
    return {"samples": len(records), "wall": wall, "cpu": cpu}


def minimal_batch_config(prompts: Path, max_new_tokens: int) -> Any:
    """A manifest config for the minimal loop's shards (identity fields are placeholders:
    nothing reads them back)."""
    from eagle_tui.core.sampling import SamplingIdentity, SamplingPreset
    from eagle_tui.core.shards.manifest import BatchConfig

    return BatchConfig(
        prompt_file=str(prompts), prompt_sha256="0" * 64, tokenizer_path="bundled",
        tokenizer_fingerprint="0" * 64, template_hash="0" * 64,
        sampling=SamplingIdentity(max_new_tokens=max_new_tokens,
                                  presets=(SamplingPreset(temperature=1.0),)))


async def child_render(args: argparse.Namespace) -> dict[str, Any]:
    from eagle_tui.core.capture.prompts import PromptRecord, open_prompts
    from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer

    tokenizer = load_tokenizer(bundled_tokenizer_path())
    records = [r for r in open_prompts(Path(args.prompts)) if isinstance(r, PromptRecord)]
    records = records[:2000]
    cpu = cpu_seconds()
    tokens = sum(len(tokenizer.render(r.messages, r.tools)) for r in records)
    cpu = cpu_seconds() - cpu
    return {"prompts": len(records), "cpu": cpu, "tokens": tokens}


async def child_capacity(args: argparse.Namespace) -> dict[str, Any]:
    """Server-side tokens/s in a steady-state window, with the capture or a bare loop."""
    import httpx

    from eagle_tui.core.capture.engine import CaptureEngine
    from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer

    tokenizer = load_tokenizer(bundled_tokenizer_path())
    if args.pools:  # the reference: a bare loop with the same concurrency
        run = asyncio.ensure_future(child_bare(args))
        stop = run.cancel
    else:
        config = capture_config(Path(args.prompts), Path(args.out), args.url,
                                max_new_tokens=args.max_new_tokens,
                                concurrency=args.concurrency,
                                extra_sampling={"ignore_eos": True}, stop_grace_s=0.0)
        engine = CaptureEngine(config, tokenizer=tokenizer)
        run = asyncio.ensure_future(engine.run())

        def stop() -> None:
            engine.stop(abort=True)

    async def generated() -> tuple[float, int]:
        async with httpx.AsyncClient() as client:
            state = (await client.get(f"{args.url[0]}/sim/state")).json()
        return time.perf_counter(), int(state["generation_tokens"])

    await asyncio.sleep(args.warmup)
    t0, g0 = await generated()
    await asyncio.sleep(args.window)
    t1, g1 = await generated()
    stop()
    await asyncio.gather(run, return_exceptions=True)
    return {"tokens_per_s": (g1 - g0) / (t1 - t0), "window_s": t1 - t0}


async def child_rss(args: argparse.Namespace) -> dict[str, Any]:
    from eagle_tui.core.capture.engine import CaptureEngine
    from eagle_tui.core.tokenizer import bundled_tokenizer_path, load_tokenizer

    tokenizer = load_tokenizer(bundled_tokenizer_path())
    config = capture_config(Path(args.prompts), Path(args.out), args.url,
                            max_new_tokens=args.max_new_tokens, concurrency=args.concurrency)
    engine = CaptureEngine(config, tokenizer=tokenizer)
    run = asyncio.ensure_future(engine.run())
    samples: list[tuple[int, float]] = [(0, rss_mb())]
    while not run.done():
        await asyncio.wait([run], timeout=2.0)
        samples.append((counts_of(engine.progress()).done, rss_mb()))
    summary = await run
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    counts = counts_of(summary.progress)
    return {"samples": counts.done, "peak_rss_mb": peak, "trace": samples,
            "wall": counts.elapsed_s}


CHILDREN = {"capture": child_capture, "bare": child_bare, "minimal": child_minimal,
            "render": child_render,
            "capacity": child_capacity, "rss": child_rss}


def child_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=CHILDREN)
    parser.add_argument("--url", action="append", default=[])
    parser.add_argument("--prompts", required=True)
    parser.add_argument("--out", default="")
    parser.add_argument("--max-new-tokens", type=int, default=1024)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--pools", type=int, default=0)
    parser.add_argument("--client", choices=BARE_CLIENTS, default="httpx")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--window", type=float, default=20.0)
    args = parser.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.ERROR)
    result = asyncio.run(CHILDREN[args.mode](args))
    print(json.dumps(result))


# -- the parent: start sims, run children, print ------------------------------------------


def run_child(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "_child", *args], capture_output=True,
                          text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"child {args[0]} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def throughput(work: Path, samples: int) -> None:
    from eagle_tui.core.sim.launcher import SimProcess

    prompts = work / "throughput.jsonl"
    write_prompts(prompts, samples)
    print(f"== 1. throughput: {samples} samples, 1,024-token outputs, concurrency 256, "
          "fastest sim ==")
    rows = {}
    for name, mode, extra in [
        ("capture engine", "capture", []),
        ("bare loop, 1 pool of 256", "bare", ["--pools", "1"]),
        ("bare loop, 32 pools of 8", "bare", ["--pools", "32"]),
        ("bare loop on the lean transport, 32 pools of 8", "bare",
         ["--pools", "32", "--client", "lean"]),
        *([("bare loop on aiohttp, 32 pools of 8", "bare", ["--pools", "32", "--client",
                                                            "aiohttp"])]
          if importlib.util.find_spec("aiohttp") else []),
    ]:
        with SimProcess(FAST) as sim:  # a fresh sim each: no cache carried over
            sim.wait_ready(60)
            out = work / f"out-{mode}-{len(rows)}"
            rows[name] = run_child(mode, "--url", sim.url, "--prompts", str(prompts),
                                   "--out", str(out), *extra)
    for name, r in rows.items():
        per_k = 1000 * r["cpu"] / r["samples"]
        print(f"  {name:48s} {r['samples'] / r['wall']:8.1f} samples/s   "
              f"{per_k:6.2f} CPU-s per 1,000 samples   (wall {r['wall']:.1f} s)")
    engine = rows["capture engine"]
    engine_k = engine["cpu"] / engine["samples"]
    for name in list(rows)[1:]:
        bare_k = rows[name]["cpu"] / rows[name]["samples"]
        print(f"  CPU per sample, capture / {name}: {engine_k / bare_k:.2f}x")
    print(f"  (capture: {engine['failed']} failed, RSS at end {engine['rss_mb']:.0f} MB)")
    render = run_child("render", "--prompts", str(prompts))
    per_prompt = render["cpu"] / render["prompts"]
    print(f"== 2. rendering: {1e6 * per_prompt:.0f} us CPU per prompt "
          f"({1 / per_prompt:,.0f} prompts/s on one thread, mean "
          f"{render['tokens'] / render['prompts']:.0f} tokens); the capture above needed "
          f"{engine['samples'] / engine['wall']:.0f} prompts/s, i.e. rendering is "
          f"{100 * per_prompt * engine['samples'] / engine['wall']:.1f}% of one core ==")


def capacity(work: Path) -> None:
    from eagle_tui.core.sim.launcher import SimProcess

    tps, cap, max_new = 25, 64, 128
    prompts = work / "capacity.jsonl"
    write_prompts(prompts, 5000)
    args = [*FAST, "--tokens-per-s", str(tps), "--capacity", str(cap)]
    print(f"== 3. capacity: sim --capacity {cap} --tokens-per-s {tps} "
          f"(= {cap * tps:,} tokens/s), {max_new}-token outputs, 20 s steady-state window ==")
    for name, concurrency, pools in [
        ("capture", cap, "0"), ("capture", cap * 3 // 2, "0"),
        ("bare loop", cap * 3 // 2, str(cap * 3 // 2 // 8)),
    ]:
        with SimProcess(args) as sim:
            sim.wait_ready(60)
            r = run_child("capacity", "--url", sim.url, "--prompts", str(prompts),
                          "--out", str(work / f"out-capacity-{name}-{concurrency}"),
                          "--max-new-tokens", str(max_new), "--concurrency", str(concurrency),
                          "--pools", pools)
        print(f"  {name:9s} concurrency {concurrency:3d}: {r['tokens_per_s']:7,.0f} tokens/s "
              f"= {100 * r['tokens_per_s'] / (cap * tps):.1f}% of capacity")


def memory(work: Path, samples: int) -> None:
    from eagle_tui.core.sim.launcher import SimProcess

    prompts = work / "rss.jsonl"
    write_prompts(prompts, samples)
    print(f"== 4. memory: {samples:,} samples (16-token outputs, concurrency 64) ==")
    with SimProcess(FAST) as sim:
        sim.wait_ready(60)
        r = run_child("rss", "--url", sim.url, "--prompts", str(prompts), "--out",
                      str(work / "out-rss"), "--max-new-tokens", "16", "--concurrency", "64")
    trace = r["trace"]
    marks = [trace[min(len(trace) - 1, i * (len(trace) - 1) // 5)] for i in range(6)]
    print("  RSS along the way: " + ", ".join(f"{d:,} done: {m:.0f} MB" for d, m in marks))
    print(f"  peak RSS {r['peak_rss_mb']:.0f} MB for {r['samples']:,} samples "
          f"({r['samples'] / r['wall']:.0f} samples/s)")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument("--rss-samples", type=int, default=100_000)
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument("--skip-capacity", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as tmp:
        work = Path(tmp)
        if not args.skip_throughput:
            throughput(work, args.samples)
        if not args.skip_capacity:
            capacity(work)
        if not args.skip_rss:
            memory(work, args.rss_samples)


if __name__ == "__main__":
    main()

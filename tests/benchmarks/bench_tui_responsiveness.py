"""Dashboard responsiveness while a batch captures at full speed with 8 live streams shown.

Runs the real app (headless, 120×40, Streams view) against the simulated server in its own
process, with a capture batch in a detached worker process (``core.batches``, as the
dashboard starts them) and 8 watched requests kept streaming over its ``/events`` stream,
plus the Server view's watcher and log follower. Measures the UI event loop's lag (how late
a 10 ms sleep wakes up: p50, p99, max), the UI thread's CPU share, the dashboard process's
CPU (UI + batch follower thread) and the worker's. Target: p99 lag <= 50 ms.

``--fleet 4,64`` measures the Fleet view instead, once per count in the same run: that many
simulated servers (each its own process, each watched by its own feed: watcher, log
follower, acceptance look) and the capture batch sending to the first four.

    .venv/bin/python tests/benchmarks/bench_tui_responsiveness.py [--seconds 20]
        [--concurrency 64] [--tokens-per-s 100] [--max-new-tokens 256] [--fleet 4,64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from eagle_tui.core.sim.launcher import SimProcess  # noqa: E402
from eagle_tui.core.tokenizer import bundled_tokenizer_path  # noqa: E402
from eagle_tui.core.urls import ServerURL  # noqa: E402
from eagle_tui.tui.app import EagleApp  # noqa: E402
from eagle_tui.tui.options import DashboardOptions, ServerTarget  # noqa: E402
from eagle_tui.tui.screens.streams import StreamsScreen  # noqa: E402
from eagle_tui.tui.sources import Sources  # noqa: E402
from eagle_tui.tui.sources.batches import DetachedCapture  # noqa: E402
from eagle_tui.tui.sources.capture import BatchRequest  # noqa: E402
from eagle_tui.tui.sources.server import ServerFeed  # noqa: E402
from eagle_tui.tui.sources.tokenizers import TokenizerCache  # noqa: E402

TICK_S = 0.01
WATCHED = 8


class LagProbe:
    """Sleeps ``TICK_S`` on the UI loop over and over and records how late it wakes."""

    def __init__(self) -> None:
        self.lags_ms: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(TICK_S)
            self.lags_ms.append((time.perf_counter() - before - TICK_S) * 1000.0)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


def thread_cpu(native_id: int) -> float:
    """CPU seconds used so far by the thread ``native_id`` of this process."""
    for thread in psutil.Process().threads():
        if thread.id == native_id:
            return thread.user_time + thread.system_time
    return 0.0


def write_prompts(path: Path, count: int) -> Path:
    with path.open("w") as out:
        for i in range(count):
            messages = [{"role": "user", "content": f"Question {i}: explain [INST] and [/]."}]
            out.write(json.dumps({"id": f"q{i}", "messages": messages}) + "\n")
    return path


async def measure(args: argparse.Namespace, sim: SimProcess, workdir: Path) -> dict[str, float]:
    target = ServerTarget(ServerURL.parse(sim.url), name="sim", log_file=sim.log_path, pid=sim.pid)
    control = DetachedCapture()
    app = EagleApp(
        DashboardOptions(servers=(target,), start_view="streams"),
        sources=Sources(
            servers=(ServerFeed(target, use_history=False),),
            capture=control,
            tokenizers=TokenizerCache(),
        ),
    )
    async with app.run_test(size=(120, 40)) as pilot:
        prompts = write_prompts(workdir / "prompts.jsonl", args.prompts)
        batch_id = await asyncio.to_thread(
            control.start,
            BatchRequest(
                prompts,
                workdir / "out",
                (sim.url,),
                bundled_tokenizer_path(),
                concurrency=args.concurrency,
                max_new_tokens=args.max_new_tokens,
            ),
        )
        app.watching = batch_id
        app.auto_watch = True  # the Streams view keeps 8 requests streaming
        while (
            not control.batches()
            or (snap := control.batches()[0]).progress is None
            or snap.progress.counts.done < 1
        ):
            await pilot.pause(0.1)
        worker = psutil.Process(control.registry.load(batch_id).pid)
        screen = app.screen
        assert isinstance(screen, StreamsScreen)
        probe = LagProbe()
        ui_thread = threading.main_thread().native_id or 0
        process = psutil.Process()
        cpu_ui0, cpu_all0, wall0 = thread_cpu(ui_thread), sum(process.cpu_times()[:2]), time.time()
        cpu_worker0 = sum(worker.cpu_times()[:2])
        done0 = control.batches()[0].progress.counts.done  # type: ignore[union-attr]
        probe.start()
        deadline = time.perf_counter() + args.seconds
        shown: list[int] = []
        while time.perf_counter() < deadline:
            shown.append(sum(1 for box in screen.slots if not box.ended))
            await pilot.pause(0.5)
        probe.stop()
        wall = time.time() - wall0
        cpu_worker = sum(worker.cpu_times()[:2]) - cpu_worker0
        progress = control.batches()[0].progress
        assert progress is not None
        result = {
            "seconds": wall,
            "samples_per_s": (progress.counts.done - done0) / wall,
            "tokens_per_s": progress.counts.tokens_per_s,
            "streams_shown_median": statistics.median(shown),
            "lag_p50_ms": statistics.median(probe.lags_ms),
            "lag_p99_ms": statistics.quantiles(probe.lags_ms, n=100)[98],
            "lag_max_ms": max(probe.lags_ms),
            "ui_thread_cpu_pct": 100 * (thread_cpu(ui_thread) - cpu_ui0) / wall,
            "process_cpu_pct": 100 * (sum(process.cpu_times()[:2]) - cpu_all0) / wall,
            "worker_cpu_pct": 100 * cpu_worker / wall,
        }
    await asyncio.to_thread(control.abort_and_wait, batch_id)
    return result


async def measure_fleet(args: argparse.Namespace, sims: list[SimProcess], workdir: Path
                        ) -> dict[str, float]:
    """The Fleet view watching every sim while a batch captures on the first four."""
    targets = [ServerTarget(ServerURL.parse(sim.url), name=f"sim{i:02d}",
                            log_file=sim.log_path, pid=sim.pid) for i, sim in enumerate(sims)]
    control = DetachedCapture()
    app = EagleApp(
        DashboardOptions(servers=tuple(targets), start_view="fleet"),
        sources=Sources(servers=tuple(ServerFeed(t, use_history=False) for t in targets),
                        capture=control, tokenizers=TokenizerCache()),
    )
    async with app.run_test(size=(120, 40)) as pilot:
        prompts = write_prompts(workdir / f"prompts-{len(sims)}.jsonl", args.prompts)
        batch_id = await asyncio.to_thread(control.start, BatchRequest(
            prompts, workdir / f"out-{len(sims)}", tuple(sim.url for sim in sims[:4]),
            bundled_tokenizer_path(), concurrency=args.concurrency // 4,
            max_new_tokens=args.max_new_tokens))
        while sum(1 for entry in app.fleet.servers.values() if entry.snapshot) < len(sims):
            await pilot.pause(0.2)
        probe = LagProbe()
        started = time.time()
        probe.start()
        await asyncio.sleep(args.seconds)
        probe.stop()
        result = {"seconds": time.time() - started,
                  "lag_p50_ms": statistics.median(probe.lags_ms),
                  "lag_p99_ms": statistics.quantiles(probe.lags_ms, n=100)[98],
                  "lag_max_ms": max(probe.lags_ms)}
    await asyncio.to_thread(control.abort_and_wait, batch_id)
    return result


def fleet_run(args: argparse.Namespace, sim_args: list[str], tmp: Path) -> None:
    """``--fleet``: the Fleet view's lag with each count of servers, in one run."""
    counts = [int(n) for n in args.fleet.split(",")]
    results = {}
    sims = [SimProcess(sim_args, log_path=tmp / f"sim{i}.log") for i in range(max(counts))]
    try:
        for sim in sims:
            sim.start()
        for sim in sims:
            sim.wait_ready(300)
        for count in counts:
            results[count] = asyncio.run(measure_fleet(args, sims[:count], tmp))
    finally:
        for sim in sims:
            sim.close()
    for count, result in results.items():
        print(f"Fleet view, {count:>3} servers, capture on 4: UI event-loop lag over "
              f"{result['seconds']:.0f} s: p50 {result['lag_p50_ms']:.1f} ms, p99 "
              f"{result['lag_p99_ms']:.1f} ms, max {result['lag_max_ms']:.1f} ms")
    first, last = counts[0], counts[-1]
    print(f"p99 with {last} servers / with {first}: "
          f"x{results[last]['lag_p99_ms'] / results[first]['lag_p99_ms']:.2f}")


async def baseline(seconds: float) -> list[float]:
    """Lag of an idle event loop in this process: what the machine itself adds right now."""
    probe = LagProbe()
    probe.start()
    await asyncio.sleep(seconds)
    probe.stop()
    return probe.lags_ms


def summary(lags_ms: list[float]) -> str:
    p99 = statistics.quantiles(lags_ms, n=100)[98]
    return f"p50 {statistics.median(lags_ms):.1f} ms, p99 {p99:.1f} ms, max {max(lags_ms):.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--tokens-per-s", type=float, default=100.0)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--prompts", type=int, default=20000)
    parser.add_argument("--fleet", default="", help="server counts, e.g. 4,64")
    args = parser.parse_args()
    idle = asyncio.run(baseline(5.0))
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["EAGLE_TUI_STATE_DIR"] = tmp
        sim_args = [
            "--time-scale",
            "0",
            "--ttft",
            "0",
            "--tokens-per-s",
            str(args.tokens_per_s),
            "--capacity",
            "4096",
            "--max-running-requests",
            "4096",
        ]
        if args.fleet:
            fleet_run(args, sim_args, Path(tmp))
            print(f"baseline (idle loop, no app, load average {load:.1f}): {summary(idle)}")
            return
        with SimProcess(sim_args, log_path=Path(tmp) / "sim.log") as sim:
            sim.wait_ready(60)
            result = asyncio.run(measure(args, sim, Path(tmp)))
    print(
        f"capture: {result['samples_per_s']:.1f} samples/s, {result['tokens_per_s']:,.0f} "
        f"tokens/s (concurrency {args.concurrency}); live streams shown: median "
        f"{result['streams_shown_median']:.0f} of {WATCHED}"
    )
    print(
        f"UI event-loop lag over {result['seconds']:.0f} s: p50 {result['lag_p50_ms']:.1f} ms, "
        f"p99 {result['lag_p99_ms']:.1f} ms, max {result['lag_max_ms']:.1f} ms "
        "(target p99 <= 50 ms)"
    )
    print(f"baseline (idle loop, no app, same machine, load average {load:.1f}): {summary(idle)}")
    print(
        f"CPU: UI thread {result['ui_thread_cpu_pct']:.0f}% of one core; dashboard process "
        f"(UI + batch follower thread) {result['process_cpu_pct']:.0f}%; detached capture "
        f"worker {result['worker_cpu_pct']:.0f}%; machine has {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()

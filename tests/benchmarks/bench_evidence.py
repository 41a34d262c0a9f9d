"""What does a second-by-second evidence sample of a 16-process server tree cost? Figures.

Run: ``python tests/benchmarks/bench_evidence.py [--ticks 60] [--rounds 3]``.

Starts a real 16-process tree shaped like an 8-rank SGLang server: a launcher, 8 "ranks"
(each holding 40 sockets and pipes, as a rank holds ZMQ sockets, eventfds and NCCL pipes,
and each reading a 64 MB weight file slowly or standing still in it), a detokenizer and 6
idle helpers. Then, in the same run, it times the CPU this process spends per tick on

- ``EvidenceSampler.sample`` (states, CPU, I/O rates, open weight files with positions,
  waits of quiet processes, children, and a rendezvous port's connection table), and
- the baseline: a bare psutil loop reading the same fields (children, status, cpu_times,
  io_counters, open_files with positions, cmdline, and ``net_connections`` for the port),

and prints CPU ms per tick, % of one core at a 1 s tick, and the ratio sampler/baseline.
Also: one ``/proc/PID/maps`` read (what a quiet rank's mapped-shard check costs, at most
every 10 s per rank) and one ``py-spy dump`` (what a stack costs, on demand only).

Measured on the shared 2-core dev VM (load average 10-16 from other engineers' tests;
medians of 3 rounds of 60 ticks; host ~150-250 processes): see docs/startup-diagnosis.md.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from eagle_tui.core.proc import procfs
from eagle_tui.core.proc.peers import DistInit
from eagle_tui.core.proc.pyspy import dump
from eagle_tui.core.proc.sampler import EvidenceSampler

RANK = r"""
import os, socket, sys, time
keep = [socket.socketpair() for _ in range(15)] + [os.pipe() for _ in range(5)]
path, moving = sys.argv[1], sys.argv[2] == "1"
f = open(path, "rb", buffering=0)
f.read(1 << 20)
while True:
    if moving:
        if not f.read(65536):
            f.seek(0)
    time.sleep(0.05)
"""
IDLE = "import time; time.sleep(3600)"
LAUNCHER = r"""
import subprocess, sys, time
rank, idle, weights = sys.argv[1], sys.argv[2], sys.argv[3:]
kids = [subprocess.Popen([sys.executable, "-c", rank, w, str(i % 2)])
        for i, w in enumerate(weights)]
kids += [subprocess.Popen([sys.executable, "-c", idle]) for _ in range(7)]
print("READY", flush=True)
time.sleep(3600)
"""


def start_tree(folder: Path) -> subprocess.Popen[str]:
    weights = []
    for index in range(8):
        path = folder / f"model-{index + 1:05d}-of-00008.safetensors"
        with open(path, "wb") as handle:
            handle.truncate(64 << 20)  # sparse: reads are real, the disk stays free
        weights.append(str(path))
    popen = subprocess.Popen([sys.executable, "-c", LAUNCHER, RANK, IDLE, *weights],
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert popen.stdout is not None and popen.stdout.readline().strip() == "READY"
    tree = psutil.Process(popen.pid)
    deadline = time.monotonic() + 60
    while len(tree.children(recursive=True)) < 15 or not _ranks_opened(tree):
        assert time.monotonic() < deadline, "the tree did not start"
        time.sleep(0.1)
    return popen


def _ranks_opened(tree: psutil.Process) -> bool:
    opened = 0
    for child in tree.children():
        try:
            opened += any(f.path.endswith(".safetensors") for f in child.open_files())
        except psutil.Error:
            return False
    return opened == 8


def baseline_tick(root: psutil.Process, port: int, cache: dict[int, psutil.Process]) -> int:
    """psutil reading the same fields; returns how many processes it saw."""
    procs = [root, *root.children(recursive=True)]
    for proc in procs:
        proc = cache.setdefault(proc.pid, proc)
        try:
            with proc.oneshot():
                proc.status()
                proc.cpu_times()
                proc.io_counters()
                proc.cmdline()
                proc.cpu_percent(None)
                for f in proc.open_files():
                    _ = (f.path, f.position)
        except psutil.Error:
            continue
    _ = [c for c in psutil.net_connections("tcp") if c.laddr and c.laddr.port == port]
    return len(procs)


def baseline_round(root: int, port: int, args: argparse.Namespace) -> list[float]:
    cache: dict[int, psutil.Process] = {}
    tree = psutil.Process(root)
    return cpu_per_tick(lambda _now: baseline_tick(tree, port, cache), args.ticks, args.interval)


def cpu_per_tick(step: Any, ticks: int, interval: float) -> list[float]:
    """CPU seconds this process spends in ``step(now)``, one figure per tick."""
    spent = []
    for _ in range(ticks):
        before = time.process_time()
        step(time.monotonic())
        spent.append(time.process_time() - before)
        time.sleep(interval)
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ticks", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between ticks")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, socket.socket() as store:
        store.bind(("127.0.0.1", 0))
        store.listen()
        port = store.getsockname()[1]
        popen = start_tree(Path(folder))
        try:
            run(popen.pid, port, args)
        finally:
            for proc in psutil.Process(popen.pid).children(recursive=True):
                proc.kill()
            popen.kill()
            popen.wait()
            if popen.stdout is not None:
                popen.stdout.close()
    return 0


def run(root: int, port: int, args: argparse.Namespace) -> None:
    dist = DistInit("127.0.0.1", port, nnodes=2, node_rank=0, world_size=16)
    size = len(psutil.Process(root).children(recursive=True)) + 1
    print(f"tree: {size} processes; host: {len(procfs.list_pids())} processes; "
          f"{args.ticks} ticks x {args.rounds} rounds, {args.interval:g} s apart")  # fmt: skip
    ours, base = [], []
    for _ in range(args.rounds):
        sampler = EvidenceSampler(root, dist=dist)
        sampler.sample(time.monotonic())
        ours.append(statistics.median(cpu_per_tick(sampler.sample, args.ticks, args.interval)))
        base.append(statistics.median(baseline_round(root, port, args)))
    sample = EvidenceSampler(root, dist=dist)
    sample.sample(time.monotonic())
    evidence = sample.sample(time.monotonic())
    files = sum(len(p.files) for p in evidence.processes)
    assert files >= 8, f"the sampler saw {files} weight files, expected 8"
    ms, base_ms = statistics.median(ours) * 1e3, statistics.median(base) * 1e3
    print(f"{'':28}{'CPU ms/tick':>12}{'% core @1s':>12}")
    print(f"{'EvidenceSampler.sample':28}{ms:12.2f}{ms / 10:12.3f}")
    print(f"{'psutil loop (baseline)':28}{base_ms:12.2f}{base_ms / 10:12.3f}")
    print(f"ratio sampler/baseline: {ms / base_ms:.2f}   (rounds: "
          + ", ".join(f"{a * 1e3:.2f}/{b * 1e3:.2f}" for a, b in zip(ours, base, strict=True))
          + ")")  # fmt: skip
    rank = next(p for p in evidence.processes if p.files)
    before = time.process_time()
    for _ in range(20):
        procfs.mapped_files(rank.pid, (".safetensors",))
    print(f"/proc/PID/maps of one rank: {(time.process_time() - before) / 20 * 1e3:.2f} CPU ms")
    started = time.monotonic()
    stack = dump(rank.pid)
    print(f"py-spy dump of one rank: {stack.status.value}, {time.monotonic() - started:.2f} s wall")
    print(f"sample seen: {len(evidence.processes)} processes, {files} weight files, "
          f"peers: {evidence.peers.describe() if evidence.peers else '-'}")  # fmt: skip
    os.sched_yield()


if __name__ == "__main__":
    sys.exit(main())

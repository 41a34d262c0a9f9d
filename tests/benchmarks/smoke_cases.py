"""The benchmark scripts' smoke cases (issue 23 item 4), shared by the ``test_bench_smoke*``
files: every ``bench_*.py`` runs at a tiny size as a user would run it (a fresh interpreter,
its own options set small) and must exit 0 and print its figure lines; the figures themselves
are read from full runs (docs). The cases are split into groups, one test file each, so the
suite's workers (``-n 3 --dist loadfile``: a file is the unit) share them out. A script that
needs a program this machine lacks (btop) is skipped with the reason.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).parent
NUMBER = r"[\d,]+(?:\.\d+)?"


@dataclass(frozen=True)
class Smoke:
    """One script at a tiny size, and the figure lines it must print."""

    script: str
    argv: tuple[str, ...]
    figures: tuple[str, ...]
    programs: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    broken: str = ""

    @property
    def param(self) -> object:
        marks = [pytest.mark.xfail(strict=True, reason=self.broken)] if self.broken else []
        return pytest.param(self, id=self.script, marks=marks)


SMOKES = (
    Smoke("bench_accept", ("--requests", "30", "--max-new-tokens", "32", "--skip-capacity"),
          (rf"accept replay / bare httpx loop: {NUMBER}x",
           rf"on the capture.s transport: {NUMBER}x")),
    Smoke("bench_capture", ("--samples", "40", "--skip-capacity", "--skip-rss"),
          (rf"capture / bare loop, 32 pools of 8: {NUMBER}x",
           rf"== 2\. rendering: {NUMBER} us CPU per prompt")),
    Smoke("bench_capture_ab", ("--rounds", "1", "--samples", "40"),
          (rf"^A \(installed\): median capture {NUMBER} CPU-s .* bare loop {NUMBER}x",
           rf"^B \(installed\): median capture {NUMBER} CPU-s .* bare loop {NUMBER}x",
           rf"^    B: median capture / minimal lean loop {NUMBER}x")),
    Smoke("bench_demo_exit", ("--runs", "1", "--after", "0.2", "--way", "q", "--way", "SIGTERM"),
          (rf"^q +exit after {NUMBER} s; everything gone after {NUMBER} s; left: ",
           rf"^SIGTERM +exit after {NUMBER} s",
           rf"^first paint: median {NUMBER} s, worst {NUMBER} s over 2 runs")),
    Smoke("bench_events", ("--prompts", "6", "--rounds", "1", "--events", "2000"),
          (rf"make \+ publish, 4 stalled clients: +{NUMBER} ns/event",
           rf"^all +yes +{NUMBER} +{NUMBER} ")),
    Smoke("bench_evidence", ("--ticks", "3", "--rounds", "1", "--interval", "0.05"),
          (rf"^EvidenceSampler\.sample +{NUMBER} +{NUMBER}",
           rf"^ratio sampler/baseline: {NUMBER}")),
    Smoke("bench_export", ("--gib", "0.001", "--tokens", "64"),
          (rf"^speculators +{NUMBER} +{NUMBER}", rf"^parquet +{NUMBER} +{NUMBER}")),
    Smoke("bench_inspect_cpu", ("--runs", "1"),
          (rf"^tokenizers alone \(shipped\) +median {NUMBER} CPU-s",
           rf"inspect CPU through transformers / tokenizers alone: {NUMBER}x")),
    Smoke("bench_generate_decode", ("--tokens", "64", "--rounds", "1"),
          (rf"non-streaming answer +json\.loads \+ checks +{NUMBER} +msgspec typed +{NUMBER}",)),
    Smoke("bench_hostile_memory", ("--rows", "600", "--prompts", "2"),
          (rf"^accept, proposed drafts 10\^15 +exit 2 +peak RSS +{NUMBER} MiB",
           rf"^inspect --index 0 +groups of +600 rows .* exit 0 +peak RSS +{NUMBER} MiB",
           rf"^export +groups of +512 rows .* exit 0 +peak RSS +{NUMBER} MiB")),
    Smoke("bench_multiturn", ("--conversations", "12", "--warmup", "0.5", "--window", "1",
                              "--repeats", "1", "--concurrency", "96"),
          (r"multi-turn / single-turn: (?:\d+\.\d+|nan)$",
           rf"concurrency +96 run 1 multi-turn +{NUMBER} tokens/s")),
    Smoke("bench_router_workers", ("--workers", "50", "--prompts", "3"),
          (rf"^capture +peak RSS: 2 workers +{NUMBER} MiB, 50 workers +{NUMBER} MiB",)),
    Smoke("bench_scaleout", ("--servers", "2", "--warmup", "0.5", "--window", "1"),
          (rf"bare loop: +{NUMBER} samples/s, client {NUMBER} ms CPU/sample",
           rf"router: +{NUMBER} samples/s, .* {NUMBER}% of the servers' capacity",
           r"^limit: the (?:client|machine|round trip between answers) "),
          modules=("sglang_router",)),
    Smoke("bench_shards", ("--rows", "20", "--tokens", "256"),
          (rf"^write 20 rows .* {NUMBER} M tokens/s", rf"^scan_completed .* {NUMBER} ms")),
    Smoke("bench_fleet_table", ("--rows", "4", "--frames", "2", "--rounds", "1"),
          (rf"^ +4 rows changing: Fleet table {NUMBER} ms CPU a frame, DataTable {NUMBER} ms "
           rf"\(x{NUMBER}\)$",)),
    Smoke("bench_sim", ("--seconds", "0.3", "--tokens", "8"),
          (rf"^ +64 +{NUMBER} +{NUMBER} +{NUMBER} +{NUMBER}$",)),
    Smoke("bench_startup_corpus", ("--only", "09"),
          (r"^verdict accuracy +1/1 = \d+ %", r"flagged \d+/1; max \d+ s")),
    Smoke("bench_tui_bandwidth", ("--seconds", "1", "--views", "server", "--reference", "btop"),
          (rf"^ +server +{NUMBER} KB/s · btop +{NUMBER} KB/s \(×{NUMBER}\)",),
          programs=("btop",)),
    Smoke("bench_tui_responsiveness", ("--seconds", "2", "--concurrency", "8",
                                       "--prompts", "200"),
          (rf"^UI event-loop lag over {NUMBER} s: p50 {NUMBER} ms, p99 {NUMBER} ms",)),
    Smoke("bench_tui_startup", ("--runs", "1",),
          (rf"time to first paint over 1 runs: median {NUMBER} s",)),
)


def missing(smoke: Smoke) -> list[str]:
    """What this machine lacks to run ``smoke``."""
    return ([f"the program {name}" for name in smoke.programs if shutil.which(name) is None]
            + [f"the module {name}" for name in smoke.modules
               if importlib.util.find_spec(name) is None])


GROUPS = {
    "capture": ("bench_capture", "bench_router_workers"),
    "ratios": ("bench_capture_ab", "bench_multiturn", "bench_accept"),
    "serving": ("bench_scaleout", "bench_generate_decode", "bench_sim", "bench_events"),
    "tui": ("bench_demo_exit", "bench_fleet_table", "bench_tui_bandwidth",
            "bench_tui_responsiveness", "bench_tui_startup"),
    "data": ("bench_export", "bench_shards", "bench_inspect_cpu"),
    "memory": ("bench_hostile_memory",),
    "health": ("bench_evidence", "bench_startup_corpus"),
}
"""Which test file (``test_bench_smoke_GROUP.py``) runs which scripts: groups of at most
half a minute on a loaded 2-core host, so no file holds a worker for long."""


def params(group: str) -> list[object]:
    """The cases of one group, as pytest parameters."""
    return [smoke.param for smoke in SMOKES if smoke.script in GROUPS[group]]


def run_smoke(smoke: Smoke) -> None:
    """Run ``smoke``'s script; it exits 0 and prints every figure line."""
    lacking = missing(smoke)
    if lacking:
        pytest.skip(f"{smoke.script} needs {', '.join(lacking)}")
    done = subprocess.run([sys.executable, str(HERE / f"{smoke.script}.py"), *smoke.argv],
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    for figure in smoke.figures:
        assert re.search(figure, done.stdout, re.MULTILINE), (figure, done.stdout[-3000:])

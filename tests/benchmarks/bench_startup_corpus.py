"""How well does the watcher read real SGLang start-ups? (A script, not a test.)

Replays every log of tests/fixtures/serverlogs through the real watcher with default
settings (see tests/support/replay.py: the log file written at the log's own pace on a fake
clock, a real stand-in process, real ``/health`` over HTTP) and prints:

- line recall: of the lines a person marked meaningful (``*.expect.txt``), the share the
  parser turns into the right kind of event;
- phase recall: of the start-up phases a log shows, the share the watcher entered; and the
  phase it names where the start-up ended (crashed, stalled, ready);
- verdict accuracy (the last verdict once the whole log is in and the process has done what
  the log says), crashes diagnosed from the log alone (before the process exits), and
  crash-cause accuracy (the verdict quotes the line a person would quote);
- lagging ranks named as a person names them;
- time-to-flag per hang: seconds from a stalled log's last line to the ``stalled`` flag,
  false stalls on healthy logs replayed at their real pace, and the hangs inside crash logs.

    python tests/benchmarks/bench_startup_corpus.py [--only 09 --only 24] [--verbose]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import re
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from support.replay import (  # noqa: E402
    CorpusLog,
    Replay,
    line_times,
    load_corpus,
    replay,
    watch_like_the_verb,
)

from eagle_tui.core.serverlog import parser  # noqa: E402
from eagle_tui.core.sim.launcher import free_port  # noqa: E402

# Which event classes count as reading an annotated line right.
KIND_EVENTS: dict[str, frozenset[str]] = {
    "server_args": frozenset({"ServerArgsSeen"}),
    "distributed_init": frozenset({"DistributedInit"}),
    "nccl": frozenset({"DistributedInit", "ErrorLine"}),
    "weight_load_begin": frozenset({"WeightLoadBegin"}),
    "weight_progress": frozenset({"ShardProgress"}),
    "weight_load_end": frozenset({"WeightLoadEnd"}),
    "kv_cache": frozenset({"KvCacheAllocated"}),
    "memory_pool": frozenset({"MemoryPoolEnd"}),
    "graph_capture_begin": frozenset({"GraphCaptureBegin"}),
    "graph_capture_progress": frozenset({"GraphCaptureProgress"}),
    "graph_capture_end": frozenset({"GraphCaptureEnd"}),
    "scheduler_limits": frozenset({"SchedulerLimits"}),
    "process_started": frozenset({"ServerProcessStarted"}),
    "startup_complete": frozenset({"AppStartupComplete"}),
    "port_bound": frozenset({"PortBound"}),
    "ready": frozenset({"ServerReady"}),
    "http_access": frozenset({"HttpAccess"}),
    "batch_stats": frozenset({"BatchStats"}),
    "warning": frozenset({"WarningLine"}),
    "error": frozenset({"Fatal", "ErrorLine"}),
    "traceback": frozenset({"TracebackStart", "Fatal"}),  # a fatal line opening one
    "exception_line": frozenset({"ExceptionLine", "Fatal"}),
    "shutdown": frozenset({"Shutdown"}),
    "killed": frozenset({"Fatal"}),
}
KIND_PHASE = {
    "server_args": "launching",
    "distributed_init": "distributed_init",
    "nccl": "distributed_init",
    "weight_load_begin": "loading_weights",
    "weight_progress": "loading_weights",
    "weight_load_end": "allocating_kv",
    "kv_cache": "allocating_kv",
    "memory_pool": "allocating_kv",
    "graph_capture_begin": "capturing_graphs",
    "graph_capture_progress": "capturing_graphs",
    "graph_capture_end": "capturing_graphs",
    "process_started": "warming_up",
    "startup_complete": "warming_up",
    "port_bound": "warming_up",
    "ready": "ready",
}
HANG_INSIDE_S = 120.0  # a silence this long inside a crash log is a hang a watcher should flag


def events_of(text: str) -> list[Any]:
    """The events the watcher's parser makes of one ``\\n``-line (bars split on ``\\r``)."""
    found = []
    for piece in text.split("\r"):
        if piece.strip():
            found += [parser.parse_line(part) for part in parser.split_glued(piece)]
    return found


def line_recall(log: CorpusLog) -> tuple[int, int, list[str]]:
    """(recognised, annotated, misses) for one log."""
    hits, misses = 0, []
    for number, kind in sorted(log.kinds.items()):
        names = {type(e).__name__ for e in events_of(log.lines[number - 1])}
        if names & KIND_EVENTS[kind]:
            hits += 1
        else:
            misses.append(f"L{number} {kind}: got {sorted(names)}")
    return hits, len(log.kinds), misses


def expected_phases(log: CorpusLog) -> set[str]:
    phases = {KIND_PHASE[k] for k in log.kinds.values() if k in KIND_PHASE}
    if log.outcome == "ready":
        phases.add("ready")
    return phases


def seen_phases(result: Replay) -> set[str]:
    seen = {s.phase.value for _, s in result.snapshots}
    for _, snapshot in result.snapshots:
        seen.update(p.value for p, _ in snapshot.phase_durations)
    return seen


def reached_phase(result: Replay) -> str | None:
    """The start-up phase the watcher says the server got to."""
    final = result.final
    reached = getattr(final, "reached", None)
    if reached is not None:
        return str(reached.value)
    starts = [p.value for p, _ in final.phase_durations]
    if final.phase.value in ("ready",) or not starts:
        return final.phase.value
    return starts[-1]


def normal(text: str) -> str:
    text = re.sub(r"^\[[^\]]*\]\s*", "", text.strip())
    return " ".join(text.split())


def cause_quoted(log: CorpusLog, diagnosis: str) -> bool:
    cause = normal(str(log.meta["cause"]))
    return bool(cause) and cause[:60] in " ".join(diagnosis.split())


def lagging_named(result: Replay) -> set[str]:
    final = result.final
    named = getattr(final, "lagging_ranks", None)
    if named is not None:
        return set(named)
    texts = [f.evidence for f in final.flags]
    if final.verdict is not None:
        texts.append(final.verdict.diagnosis)
    found: set[str] = set()
    for text in texts:
        for clause in re.findall(r"ranks behind: ([^;]*)", text):
            found |= set(re.findall(r"\b(?:DP\d+ )?TP\d+\b", clause))
    return found


def stall_flag_times(result: Replay) -> list[float]:
    return [t for t, s in result.snapshots if s.flag("stalled") is not None]


def hangs_inside(log: CorpusLog) -> list[tuple[float, float]]:
    """(start, end) of silences of at least HANG_INSIDE_S before the last line."""
    times = line_times(log.lines)
    return [(a, b) for a, b in itertools.pairwise(times) if b - a >= HANG_INSIDE_S]


async def run_one(log: CorpusLog, workdir: Path) -> Replay:
    return await replay(log, workdir, watch_like_the_verb, port=free_port())


def pct(part: float, whole: float) -> str:
    return f"{part}/{whole} = {100.0 * part / whole:.0f} %" if whole else "n/a"


def report(logs: list[CorpusLog], results: dict[str, Replay], verbose: bool) -> None:
    line_hits = line_total = 0
    phase_hits = phase_total = reached_ok = 0
    verdict_ok = crashes = from_log = cause_ok = causes = 0
    lag_expected = lag_ok = lag_false = 0
    hang_rows, false_stalls, inside_rows = [], [], []
    print(f"{'log':<48} {'lines':>9} {'phases':>7} {'reached':<17} {'verdict':<14} cause  lag")
    for log in logs:
        result = results[log.name]
        hits, total, misses = line_recall(log)
        line_hits, line_total = line_hits + hits, line_total + total
        want, seen = expected_phases(log), seen_phases(result)
        phase_hits, phase_total = phase_hits + len(want & seen), phase_total + len(want)
        reached = reached_phase(result)
        reached_ok += reached == log.meta["phase"]
        verdict = result.final.verdict
        outcome = verdict.outcome.value if verdict is not None else "none"
        verdict_ok += outcome == log.outcome
        diagnosis = verdict.diagnosis if verdict is not None else ""
        cause = ""
        if log.outcome in ("crashed", "stalled", "stopped", "port_conflict"):
            causes += 1
            good = cause_quoted(log, diagnosis)
            cause_ok += good
            cause = "yes" if good else "NO"
        if log.outcome in ("crashed", "port_conflict"):
            crashes += 1
            early = result.before_exit().verdict
            from_log += early is not None and early.outcome.value == log.outcome
        expected_lag = set(log.meta["lagging_ranks"])
        named = lagging_named(result)
        lag = ""
        if expected_lag:
            lag_expected += 1
            lag_ok += named == expected_lag
            lag = "yes" if named == expected_lag else f"NO {sorted(named)}"
        elif named:
            lag_false += 1
            lag = f"extra {sorted(named)}"
        stalls = stall_flag_times(result)
        if log.outcome == "stalled":
            delay = stalls[0] - result.last_line_at if stalls else None
            hang_rows.append((log.name, delay))
        if log.outcome == "ready" and stalls:
            false_stalls.append((log.name, stalls[0]))
        if log.outcome == "crashed":
            for start, end in hangs_inside(log):
                inside = [t for t in stalls if start <= t <= end]
                inside_rows.append((log.name, start, end, inside[0] - start if inside else None))
        print(
            f"{log.name[:48]:<48} {hits:>4}/{total:<4} {len(want & seen)}/{len(want):<5} "
            f"{(reached or '-')[:16]:<17} {outcome[:13]:<14} {cause:<6} {lag}"
        )
        if verbose:
            for miss in misses:
                print(f"      miss {miss[:150]}")
            print(f"      phases want {sorted(want)} seen {sorted(seen)}")
            print(f"      verdict: {diagnosis[:400]}")
    print()
    print(f"line recall            {pct(line_hits, line_total)}")
    print(f"phase recall           {pct(phase_hits, phase_total)}")
    print(f"phase reached          {pct(reached_ok, len(logs))}")
    print(f"verdict accuracy       {pct(verdict_ok, len(logs))}")
    print(f"crash from log alone   {pct(from_log, crashes)}")
    print(f"cause accuracy         {pct(cause_ok, causes)} (every log that is not ready)")
    print(f"lagging ranks named    {pct(lag_ok, lag_expected)}; ranks named where none lag: "
          f"{lag_false}")
    print(f"false stalls (healthy logs at real pace): {len(false_stalls)} {false_stalls}")
    print("time-to-flag per hang (s from the last line, default settings):")
    for name, delay in hang_rows:
        print(f"    {name:<48} {'not flagged' if delay is None else f'{delay:.0f}'}")
    flagged = [d for _, d in hang_rows if d is not None]
    if flagged:
        print(f"    flagged {len(flagged)}/{len(hang_rows)}; max {max(flagged):.0f} s; "
              f"within 60 s: {sum(d <= 60 for d in flagged)}/{len(hang_rows)}")
    print("hangs inside crash logs (silence >= 120 s, s from its start to the stall flag):")
    for name, start, end, delay in inside_rows:
        said = "not flagged" if delay is None else f"{delay:.0f}"
        print(f"    {name:<48} silence {end - start:.0f} s: {said}")


async def main_async(only: Iterable[str], verbose: bool) -> None:
    logs = [log for log in load_corpus() if not only or log.name[:2] in set(only)]
    results = {}
    with tempfile.TemporaryDirectory(prefix="corpus-replay-") as tmp:
        for log in logs:
            results[log.name] = await run_one(log, Path(tmp))
    report(logs, results, verbose)


def main() -> None:
    parser_ = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser_.add_argument("--only", action="append", default=[], help="log number (repeatable)")
    parser_.add_argument("--verbose", action="store_true", help="misses and diagnoses per log")
    args = parser_.parse_args()
    asyncio.run(main_async(args.only, args.verbose))


if __name__ == "__main__":
    main()

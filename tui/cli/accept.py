"""``eagle-tui accept``: measure a drafter's acceptance by replaying prompts on SGLang.

Replays a prompt file (``--prompts``) or a batch's held-out split (``--from-batch``) on a
speculative-decoding server with the capture's rendering, dispatch, retries and exact ids,
and prints per category: n, the accept length as Σcompletion/Σverify (SpecForge's
``bench_eagle3.py`` figure, the one model cards publish) and as the mean of per-request
figures, the accept rate, P(at least j drafts accepted) per position, output tokens/s and
the degenerate outputs. ``--against URL`` replays the same prompts on a second server and
prints B - A per category with a 95 % bootstrap interval. The result is compared with the
last one of the same target, config, prompt set and sampling in ``accept-results.jsonl``
(beside the batch or prompt file), then stored there (``--no-store``: only compared); with
``--against`` both servers' results are, ``--label`` naming B's. docs/acceptance.md says
what each figure means.

Exit status: 0 measured; 1 measured, but prompts failed or an alarm was raised on either
server (1.00 per verify step, no verify step at all: a server that does not speculate, a
fall against the stored result); 2 refused (bad flags, unreadable files, a
batch without a held-out split, an unreachable server before anything was measured); 3 an
internal error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import TextIO

import msgspec

from eagle_tui.core.accept.ab import Difference
from eagle_tui.core.accept.alarms import Alarm
from eagle_tui.core.accept.stored import Comparison
from eagle_tui.core.accept.summary import CategorySummary
from eagle_tui.core.argtypes import DirIn, FileIn, FileOut, Line, Number, Whole, seconds
from eagle_tui.core.capture.acceptance import (
    AcceptOutcome,
    AcceptSettings,
    SideResult,
    default_results_path,
    from_batch,
    measure,
)
from eagle_tui.core.capture.config import MAX_CONCURRENCY, RetryPolicy
from eagle_tui.core.capture.replay import ReplaySettings
from eagle_tui.core.errors import EagleError
from eagle_tui.core.sglang import API_KEY_ENV
from eagle_tui.core.text import terminal_safe
from eagle_tui.tui.options import server_url

EXIT_OK, EXIT_ATTENTION, EXIT_REFUSED, EXIT_CRASHED = 0, 1, 2, 3


MAX_INT32 = (1 << 31) - 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``accept`` flags (named as ``capture`` names them)."""
    what = parser.add_argument_group("what to replay").add_mutually_exclusive_group(
        required=True)
    what.add_argument("--prompts", type=FileIn("prompt file"), metavar="FILE",
                      help="a prompt file (JSONL or parquet, as capture reads; a record's "
                      "'category' field groups the figures)")
    what.add_argument("--from-batch", type=DirIn("batch directory"), metavar="DIR",
                      help="a capture batch: replay exactly its held-out split")
    where = parser.add_argument_group("where")
    where.add_argument("--server", required=True, type=server_url, metavar="URL")
    where.add_argument("--against", type=server_url, metavar="URL",
                       help="a second server (B) for an A/B: B - A per category, 95 %% CI; "
                       "both results are stored, --label naming B's")
    where.add_argument("--tokenizer", type=DirIn("tokenizer directory"), metavar="DIR",
                       help="the target's tokenizer (default with --from-batch: the batch's)")
    sampling = parser.add_argument_group("sampling")
    sampling.add_argument("--max-new-tokens", type=Whole(1, MAX_INT32), default=1024)
    sampling.add_argument("--temperature", type=Number(0, 100), default=0.0,
                          help="default 0 (greedy), as benchmarks measure acceptance")
    running = parser.add_argument_group("running and results")
    running.add_argument("--concurrency", type=Whole(1, MAX_CONCURRENCY), default=16,
                         help="requests in flight per server (acceptance depends on it)")
    running.add_argument("--timeout", type=seconds(), default=600.0,
                         help="seconds per request")
    running.add_argument("--retries", type=Whole(1, 100), default=6)
    running.add_argument("--results", type=FileOut("results file"), metavar="FILE",
                         help="stored results (default: accept-results.jsonl beside the "
                         "batch or prompt file)")
    running.add_argument("--no-store", action="store_true",
                         help="compare with the stored results but do not add this one")
    running.add_argument("--label", type=Line("a label"),
                         help="a name for the result of the server measured (the drafter): "
                         "--server's, or --against's (B) in an A/B")
    running.add_argument("--api-key-file", type=FileIn("API key file"))
    running.add_argument("--json", action="store_true",
                         help="print one JSON object (overall, categories, ...)")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Replay, print, return the exit status."""
    stream = out or sys.stdout
    try:
        settings = settings_from_args(args)
    except (EagleError, ValueError, OSError) as e:
        return _say(e, EXIT_REFUSED)
    try:
        outcome = asyncio.run(measure(settings))
    except EagleError as e:
        return _say(e, EXIT_REFUSED)
    except Exception as e:  # a bug: one line, not a traceback
        return _say(f"internal error ({type(e).__name__}: {terminal_safe(str(e))[:300]})",
                    EXIT_CRASHED)
    if args.json:
        stream.write(msgspec.json.encode(outcome).decode() + "\n")
    else:
        stream.write(report_text(outcome))
    return EXIT_ATTENTION if outcome.failures or _alarms(outcome) else EXIT_OK


def settings_from_args(args: argparse.Namespace) -> AcceptSettings:
    """Checked settings (ValueError/ConfigError naming the flag when wrong)."""
    if args.prompts is not None and args.tokenizer is None:
        raise ValueError("--tokenizer DIR is needed with --prompts (the target's tokenizer)")
    replay = ReplaySettings(
        prompts=args.prompts or Path(), tokenizer=args.tokenizer or Path(""),
        server=args.server, max_new_tokens=args.max_new_tokens,
        temperature=args.temperature, concurrency=args.concurrency,
        request_timeout_s=args.timeout, retry=RetryPolicy(max_attempts=args.retries),
        api_key=_api_key(args.api_key_file))
    if args.from_batch is not None:
        replay = from_batch(args.from_batch, replay, tokenizer=args.tokenizer)
    results = args.results or default_results_path(replay, args.from_batch)
    return AcceptSettings(
        replay=replay, against=args.against,
        results=results, label=args.label or "", batch=args.from_batch,
        store=not args.no_store)


def report_text(outcome: AcceptOutcome) -> str:
    """The tables people read."""
    lines = [_heading(outcome.server, outcome.target, outcome.spec.summary, outcome.held_out),
             *_table(outcome.overall, outcome.categories)]
    if outcome.against is not None:
        side: SideResult = outcome.against
        lines += ["", _heading(side.server, side.target, side.spec.summary, outcome.held_out),
                  *_table(side.overall, side.categories)]
    if outcome.differences is not None:
        lines += ["", "B - A (accept length, 95 % bootstrap interval over requests):",
                  *(_difference(name, d) for name, d in outcome.differences.items())]
    b = outcome.against
    lines += _comparison(outcome.comparison, outcome.server if b is not None else "")
    if b is not None:
        lines += _comparison(b.comparison, b.server)
    for failure in outcome.failures[:10]:
        lines.append(f"failed: {failure.sample_id}: {failure.reason}")
    if len(outcome.failures) > 10:
        lines.append(f"failed: {len(outcome.failures) - 10} more")
    for alarm in _alarms(outcome):
        lines += [f"ALARM {alarm.kind}: {alarm.message}", f"  next: {alarm.next_step}"]
    lines += _storage(outcome)
    return terminal_safe("\n".join(lines), multiline=True) + "\n"


def _alarms(outcome: AcceptOutcome) -> list[Alarm]:
    """Every alarm of the run: A's (with its comparison's), then B's."""
    return [*outcome.alarms, *(outcome.against.alarms if outcome.against else [])]


def _comparison(c: Comparison | None, server: str) -> list[str]:
    """The change since the stored result (``server`` named in an A/B, where each side is
    compared with its own)."""
    if c is None:
        return []
    who = f"{server} " if server else ""
    stored = ", ".join(part for part in (c.previous_label, c.previous_server) if part)
    lines = ["", f"{who}against the stored result of {c.previous_created_at}"
                 f"{f' ({stored})' if stored else ''}:"]
    return lines + [f"  {ch.category:<16} {_num(ch.before)} -> {_num(ch.now)}  "
                    f"({_signed(ch.change)})" for ch in c.changes]


def _storage(outcome: AcceptOutcome) -> list[str]:
    """Where the results went, and under which label."""
    if outcome.stored_in is None:
        return ["not stored (--no-store)"] if outcome.compared_with else []
    label = f"labelled {outcome.label!r}" if outcome.label else "unlabelled"
    if outcome.against is None:
        return [f"stored in {outcome.stored_in} ({label})"]
    return [f"stored both results in {outcome.stored_in} (B's {label}, A's unlabelled)"]


def _heading(server: str, target: str, spec: str, held_out: bool) -> str:
    split = ", held-out split" if held_out else ""
    return f"{server} ({target or 'target unknown'}; {spec}{split})"


COLUMNS = ("category", "n", "accept_len", "mean", "rate", "P(>=j) j=1..k", "tok/s",
           "degenerate", "w/o degen")


def _table(overall: CategorySummary, categories: dict[str, CategorySummary]) -> list[str]:
    rows = [COLUMNS, *(_row(name, s) for name, s in categories.items()),
            _row("overall", overall)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
            .rstrip() for row in rows]


def _row(name: str, s: CategorySummary) -> tuple[str, ...]:
    positions = " ".join(f"{p:.2f}" for p in s.per_position) or "-"
    share = "-" if s.degenerate_share is None else f"{s.degenerate} ({s.degenerate_share:.0%})"
    speed = "-" if s.output_tokens_per_s is None else f"{s.output_tokens_per_s:.1f}"
    return (name, str(s.n), _num(s.accept_length), _num(s.mean_accept_length),
            _num(s.accept_rate), positions, speed, share,
            _num(s.accept_length_without_degenerate))


def _difference(name: str, d: Difference | None) -> str:
    if d is None:
        return f"  {name:<16} -  (a side has no verify step)"
    if d.too_few:
        interval = (f"no interval: n = {d.a_n} and {d.b_n}, an interval needs at least "
                    f"{d.min_requests} requests per side")
    elif d.low is None or d.high is None:
        interval = "interval needs more requests"
    else:
        interval = f"[{_signed(d.low)}, {_signed(d.high)}]"
    verdict = ""
    if d.low is not None and d.high is not None:
        verdict = "  supported" if d.low > 0 or d.high < 0 else "  not significant"
    pairing = "paired" if d.paired else "unpaired"
    return (f"  {name:<16} {d.a:.2f} -> {d.b:.2f}  {_signed(d.difference)}  {interval} "
            f"({pairing}){verdict}")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2f}"


def _say(message: object, code: int) -> int:
    print(f"eagle-tui accept: {terminal_safe(str(message))}", file=sys.stderr)
    return code


def _api_key(path: Path | None) -> str | None:
    if path is None:
        return os.environ.get(API_KEY_ENV) or None
    return path.read_text(encoding="utf-8").strip() or None



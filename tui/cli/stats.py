"""``eagle-tui stats DIR… [--json]``: rows per flag and finish reason, length percentiles,
and what ``eagle-tui export`` would keep with the same filter options (same single read).
Several batch directories (the ``capture --shard`` slices of one job) are verified as export
verifies them (one job, no sample twice) and counted as one.

Exit status: 0 printed, 2 bad path (also a directory that is no batch: the parent of
several batches, an empty directory).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import msgspec
from rich.console import Console
from rich.table import Table

from eagle_tui.core.accept.heldout import HeldOutSplit
from eagle_tui.core.argtypes import PathIn
from eagle_tui.core.errors import EagleError
from eagle_tui.core.export.options import MASK_STARTS
from eagle_tui.core.export.tally import KeepCounts, KeepTally, batch_split
from eagle_tui.core.samples.job import open_job
from eagle_tui.core.samples.notbatch import refuse_no_batch
from eagle_tui.core.shards.conversations import ConversationStats
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.shards.stats import BatchStats, Distribution, compute_stats_over
from eagle_tui.core.text import counts_text, terminal_safe
from eagle_tui.core.wire import printable_json
from eagle_tui.tui.cli.export_filters import add_filter_arguments, row_filter_from
from eagle_tui.tui.cli.inspect import make_console
from eagle_tui.tui.render.literal_rich import Literal


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``stats`` verb's arguments."""
    parser.add_argument("path", type=PathIn("batch directory, shards directory or shard"),
                        nargs="+",
                        help="batch directory, shards directory or shard; or several batch "
                             "directories (the --shard slices of one job, checked disjoint)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    add_filter_arguments(parser)
    parser.add_argument("--mask-start", choices=MASK_STARTS, default="prompt",
                        help="mask start assumed by --max-length (as export's --mask-start)")


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    """Print the statistics of the shards under ``args.path``."""
    out = console or make_console()
    try:
        opened = open_job(args.path)
        refuse_no_batch(opened, args.path)
        footer = opened.metadata
        tally = KeepTally(row_filter_from(args), args.mask_start, args.max_length,
                          footer.tokenizer.vocab_size if footer else None)
        tally.held_out = held_out_split(args.path[0])
        stats = compute_stats_over(opened.readers, observers=[tally.add])
    except EagleError as e:
        print(f"eagle-tui stats: {terminal_safe(str(e))}", file=sys.stderr)
        return 2
    keep, job = tally.counts(), opened.slices
    if job:
        out.print(Literal(f"one job: {job}"), soft_wrap=True)
    if opened.missing and not args.json:  # --json: its missing_slices
        out.print(Literal(f"incomplete job: slice{'s' if len(opened.missing) > 1 else ''} "
                          f"{', '.join(opened.missing)} missing; these counts cover only the "
                          "slices given (pass every slice's batch directory together)"),
                  style="yellow", soft_wrap=True)
    if args.json:
        manifest = opened.manifest
        not_generated = manifest.extra.turns_not_generated if manifest is not None else {}
        document = stats_json(stats, keep, job, not_generated, opened.missing)
        out.print(Literal(document), soft_wrap=True)
        return 0
    for renderable in summary_tables(stats):
        out.print(Literal(renderable))
    out.print(Literal(keep.text()), soft_wrap=True)
    for line in ending_lines(stats.conversations, opened.manifest):
        out.print(Literal(line), soft_wrap=True)
    for ignored in stats.ignored:
        out.print(Literal(f"ignored: {ignored}"), style="yellow")
    return 0


def stats_json(stats: BatchStats, keep: KeepCounts, job: str,
               not_generated: dict[str, int] | None = None,
               missing: Sequence[str] = ()) -> str:
    """The ``--json`` document: the fields of ``BatchStats``, then ``export`` (``KeepCounts``),
    for ``--shard`` slices of one job ``job`` and ``missing_slices``, and (multi-turn)
    ``turns_not_generated``."""
    document: dict[str, object] = msgspec.to_builtins(stats)
    turns = document.get("conversations")
    if isinstance(turns, dict) and not turns.get("ended_early"):  # as before when none ended
        turns.pop("ended_early", None)
        turns.pop("ended", None)
    document["export"] = keep
    if job:
        document["job"] = job
        document["missing_slices"] = list(missing)
    if not_generated:
        document["turns_not_generated"] = not_generated
    return printable_json(document, indent=1)


def held_out_split(path: Path) -> HeldOutSplit | None:
    """The held-out split of the batch at ``path`` (export leaves it out), if it has one."""
    directory = path if path.is_dir() else path.parent
    for candidate in (directory, directory.parent):  # a batch, or its shards/ directory
        manifest = Manifest.load_optional(candidate)
        if manifest is not None:
            return batch_split(manifest)
    return None


def summary_tables(stats: BatchStats) -> list[Table]:
    """Overview, flags, finish reasons and lengths, as tables."""
    tables = [overview(stats), count_table("flag", stats.flags, stats.rows, stats.clean),
              count_table("finish reason", stats.finish_reasons, stats.rows, None),
              length_table(stats)]
    return tables + ([conversation_table(stats.conversations)] if stats.conversations else [])


def conversation_table(turns: ConversationStats) -> Table:
    """Multi-turn batches: conversations per number of stored turns, and divergences."""
    table = Table(title="conversations (multi-turn)")
    table.add_column("stored turns")
    table.add_column("conversations", justify="right")
    for count, conversations in turns.turns.items():
        table.add_row(count, str(conversations))
    table.add_row("all", str(turns.conversations))
    table.add_row("mean turns", _number(turns.mean_turns))
    table.add_row("tool_call_diverged", str(turns.diverged))
    table.add_row("ended before their last turn", str(turns.ended_early))
    return table


def ending_lines(turns: ConversationStats | None, manifest: Manifest | None) -> list[str]:
    """Multi-turn: the turns never generated per reason (the manifest's count) and which
    conversations ended early, by name (the first few; the rows are flagged)."""
    lines = []
    not_generated = manifest.extra.turns_not_generated if manifest is not None else {}
    if not_generated:
        lines.append(f"turns not generated (conversations ended early): "
                     f"{sum(not_generated.values())} ({counts_text(not_generated)})")
    if turns is None or not turns.ended_early:
        return lines
    lines += list(turns.ended)
    if turns.ended_early > len(turns.ended):
        lines.append(f"… and {turns.ended_early - len(turns.ended)} more (their last rows are "
                     "flagged conversation_ended: inspect --flag conversation_ended)")
    return lines


def overview(stats: BatchStats) -> Table:
    """Rows, shards and the manifest's counts."""
    table = Table(title="batch", show_header=False)
    table.add_row("rows in shards", str(stats.rows))
    table.add_row("shards", str(stats.shards))
    for name, value in (stats.manifest_counts or {}).items():
        table.add_row(f"manifest: {name}", str(value))
    return table


def count_table(what: str, counts: dict[str, int], rows: int, clean: int | None) -> Table:
    """One row per value with its count and share of all rows."""
    table = Table(title=f"rows per {what}")
    table.add_column(what)
    table.add_column("rows", justify="right")
    table.add_column("%", justify="right")
    entries = list(counts.items()) + ([("(clean)", clean)] if clean is not None else [])
    for name, count in entries:
        table.add_row(name, str(count), f"{100 * count / rows:.1f}" if rows else "-")
    return table


def length_table(stats: BatchStats) -> Table:
    """Token-length and latency distributions."""
    table = Table(title="lengths (tokens) and latency")
    for column in ("", "n", "mean", "p50", "p90", "p99", "max"):
        table.add_column(column, justify="left" if not column else "right")
    rows: list[tuple[str, Distribution]] = [
        ("prompt", stats.prompt_tokens), ("output", stats.output_tokens),
        ("reasoning", stats.reasoning_tokens), ("latency s", stats.latency_s),
    ]
    for name, dist in rows:
        values = (dist.mean, dist.p50, dist.p90, dist.p99, dist.max)
        table.add_row(name, str(dist.count), *(_number(v) for v in values))
    return table


def _number(value: float | None) -> str:
    """A compact number, '-' when absent."""
    if value is None:
        return "-"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"

"""``eagle-tui export DIR… --format speculators|specforge|parquet --out FILE``.

Streams the batches' shards into one file a drafter trainer loads as it is (ids exact, a
``loss_mask`` beside them), with ``FILE.manifest.json`` beside it. A thin front end over
:func:`eagle_tui.core.export.run.export`; docs/export.md has the recipes.

Exit status: 0 written, 2 bad input or output (nothing written).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TextIO

from eagle_tui.core.errors import EagleError
from eagle_tui.core.export.options import (
    DEFAULT_MASK_START,
    FORMATS,
    MASK_STARTS,
    ExportFormat,
    ExportOptions,
    MaskStart,
)
from eagle_tui.core.export.run import ExportResult, Progress, export
from eagle_tui.tui.cli.export_filters import add_filter_arguments, row_filter_from

NEXT_STEP: dict[ExportFormat, str] = {
    "speculators": "speculators prepare-data --model TOKENIZER_DIR --data {path} --output OUT",
    "specforge": "set data.prompts_path: {path} in the SpecForge run config",
    "parquet": 'datasets.load_dataset("parquet", data_files="{path}")',
}
PROGRESS_EVERY_S = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``export`` verb's arguments."""
    parser.add_argument("batches", nargs="+", type=Path, metavar="DIR",
                        help="batch directories (what `capture --out` wrote)")
    parser.add_argument("--format", required=True, choices=FORMATS,
                        help="speculators JSONL, SpecForge prompts JSONL, or parquet")
    parser.add_argument("--out", required=True, type=Path, metavar="FILE",
                        help="file to write; FILE.manifest.json goes beside it")
    defaults = ", ".join(f"{fmt} {start}" for fmt, start in DEFAULT_MASK_START.items())
    parser.add_argument("--mask-start", choices=MASK_STARTS, default=None,
                        help=f"where loss_mask turns to 1 (default per format: {defaults})")
    add_filter_arguments(parser)
    parser.add_argument("--force", action="store_true", help="replace an existing FILE")
    parser.add_argument("--include-held-out", action="store_true",
                        help="also write the rows of a batch's held-out split (capture "
                        "--held-out), which are left out by default")


def options_from(args: argparse.Namespace) -> ExportOptions:
    """ExportOptions from the parsed arguments (ConfigError for a bad flag or reason)."""
    mask: MaskStart | None = args.mask_start
    fmt: ExportFormat = args.format
    return ExportOptions(fmt, mask, row_filter_from(args), args.max_length, args.force,
                         include_held_out=args.include_held_out)


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Export, then print what was written and the next step."""
    stream = out or sys.stdout
    try:
        options = options_from(args)
        result = export(args.batches, args.out, options, progress=_progress_printer())
    except EagleError as e:
        print(f"eagle-tui export: {e}", file=sys.stderr)
        return 2
    for line in summary_lines(result, options):
        print(line, file=stream)
    return 0


def summary_lines(result: ExportResult, options: ExportOptions) -> list[str]:
    """What was written, what was left out, and what to run next."""
    size = result.bytes / 2**20
    lines = [
        f"wrote {result.counts.kept:,} rows to {result.path} ({size:,.1f} MiB, "
        f"{options.format}, loss_mask from {options.effective_mask_start})",
        f"manifest: {result.manifest_path}",
        result.counts.text(lead="kept"),
        f"next: {NEXT_STEP[options.format].format(path=result.path)} (see docs/export.md)",
    ]
    return lines


def _progress_printer() -> Progress | None:
    """A progress callback printing to a terminal's stderr every few seconds, else None."""
    if not sys.stderr.isatty():
        return None
    last = [time.monotonic()]

    def show(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S or done == total:
            last[0] = now
            print(f"\rexporting: {done:,}/{total:,} rows", end="", file=sys.stderr,
                  flush=True)
            if done == total:
                print(file=sys.stderr)

    return show

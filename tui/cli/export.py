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

from eagle_tui.core.argtypes import DirIn, FileOut
from eagle_tui.core.errors import ConfigError, EagleError
from eagle_tui.core.export.options import (
    DEFAULT_MASK_START,
    FORMATS,
    MASK_STARTS,
    ExportFormat,
    ExportOptions,
    MaskStart,
)
from eagle_tui.core.export.run import ExportResult, Progress, export
from eagle_tui.core.text import byte_size, terminal_safe
from eagle_tui.tui.cli.export_filters import add_filter_arguments, row_filter_from

NEXT_STEP: dict[ExportFormat, str] = {
    "speculators": "speculators prepare-data --model TOKENIZER_DIR --data {path} --output OUT",
    "specforge": "set data.prompts_path: {path} in the SpecForge run config",
    "parquet": 'datasets.load_dataset("parquet", data_files="{path}")',
}
PROGRESS_EVERY_S = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``export`` verb's arguments."""
    parser.add_argument("batches", nargs="+", type=DirIn("batch directory"), metavar="DIR",
                        help="batch directories (what `capture --out` wrote)")
    parser.add_argument("--format", required=True, choices=FORMATS,
                        help="speculators JSONL, SpecForge prompts JSONL, or parquet")
    parser.add_argument("--out", required=True, type=FileOut("export file"), metavar="FILE",
                        help="file to write; FILE.manifest.json goes beside it")
    defaults = ", ".join(f"{fmt} {start}" for fmt, start in DEFAULT_MASK_START.items())
    parser.add_argument("--mask-start", choices=MASK_STARTS, default=None,
                        help=f"where loss_mask turns to 1 (default per format: {defaults})")
    add_filter_arguments(parser)
    parser.add_argument("--force", action="store_true", help="replace an existing FILE")
    parser.add_argument("--allow-partial", action="store_true",
                        help="export some --shard slices of a job without the others "
                        "(refused otherwise: a drafter trained on part of a job is skewed)")

    parser.add_argument("--include-held-out", action="store_true",
                        help="also write the rows of a batch's held-out split (capture "
                        "--held-out), which are left out by default")


WRITES: dict[ExportFormat, str] = {"speculators": "JSONL", "specforge": "JSONL",
                                   "parquet": "parquet"}
SUFFIX_KIND = {".parquet": "parquet", ".jsonl": "JSONL", ".json": "JSONL"}


def options_from(args: argparse.Namespace) -> ExportOptions:
    """ExportOptions from the parsed arguments (ConfigError for a bad flag or reason)."""
    mask: MaskStart | None = args.mask_start
    fmt: ExportFormat = args.format
    _check_suffix(fmt, args.out)
    return ExportOptions(fmt, mask, row_filter_from(args), args.max_length, args.force,
                         args.allow_partial, include_held_out=args.include_held_out)


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Export, then print what was written and the next step."""
    stream = out or sys.stdout
    try:
        options = options_from(args)
        result = export(args.batches, args.out, options, progress=_progress_printer())
    except EagleError as e:
        print(f"eagle-tui export: {terminal_safe(str(e))}", file=sys.stderr)
        return 2
    for line in summary_lines(result, options):
        print(line, file=stream)
    return 0


def _check_suffix(fmt: ExportFormat, out: Path) -> None:
    """Refuse a file name that promises another format (``y.parquet`` holding JSONL)."""
    named = SUFFIX_KIND.get(out.suffix.lower())
    if named is not None and named != WRITES[fmt]:
        wanted = ".parquet" if WRITES[fmt] == "parquet" else ".jsonl"
        raise ConfigError(f"--out {out} is named {out.suffix} but --format {fmt} writes "
                          f"{WRITES[fmt]}; name it {out.with_suffix(wanted).name} or choose "
                          "the --format that matches the name")


def summary_lines(result: ExportResult, options: ExportOptions) -> list[str]:
    """What was written, what was left out, and what to run next."""
    lines = [
        f"wrote {result.counts.kept:,} rows to {result.path} ({byte_size(result.bytes)}, "
        f"{options.format}, loss_mask from {options.effective_mask_start})",
        f"manifest: {result.manifest_path}",
        result.counts.text(lead="kept"),
        f"next: {NEXT_STEP[options.format].format(path=result.path)} (see docs/export.md)",
    ]
    if result.partial is not None:
        lines.insert(2, f"warning: {result.partial} (exported with --allow-partial)")
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

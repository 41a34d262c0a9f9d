"""Row-filter arguments shared by ``export`` and ``stats`` (whose preview must match)."""

from __future__ import annotations

import argparse

from eagle_tui.core.export.options import DEFAULT_DROP_FLAGS, FINISH_REASONS, RowFilter


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    """``--keep-flag``, ``--drop-flag``, ``--finish`` and ``--max-length``."""
    parser.add_argument("--keep-flag", action="append", default=[], metavar="FLAG",
                        help=f"keep rows with FLAG (dropped by default: "
                             f"{', '.join(DEFAULT_DROP_FLAGS)})")
    parser.add_argument("--drop-flag", action="append", default=[], metavar="FLAG",
                        help="also drop rows with FLAG (repeatable)")
    parser.add_argument("--finish", default=None, metavar="LIST",
                        help=f"keep only these finish reasons, comma-separated "
                             f"({','.join(FINISH_REASONS)}; default all)")
    parser.add_argument("--max-length", type=int, default=None, metavar="N",
                        help="report rows a trainer run at max length N would cut or drop")


def row_filter_from(args: argparse.Namespace) -> RowFilter:
    """The filter the arguments describe (ConfigError for an unknown flag or reason)."""
    finish = None if args.finish is None else args.finish.split(",")
    return RowFilter.build(keep_flags=args.keep_flag, drop_flags=args.drop_flag, finish=finish)

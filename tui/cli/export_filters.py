"""Row-filter arguments shared by ``export`` and ``stats`` (whose preview must match)."""

from __future__ import annotations

import argparse

from eagle_tui.core.argtypes import Checked, Whole
from eagle_tui.core.export.options import DEFAULT_DROP_FLAGS, FINISH_REASONS, RowFilter

MAX_LENGTH = (1 << 31) - 1


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    """``--keep-flag``, ``--drop-flag``, ``--finish`` and ``--max-length``."""
    parser.add_argument("--keep-flag", action="append", default=[], metavar="FLAG",
                        type=Checked(_flag),
                        help=f"keep rows with FLAG (dropped by default: "
                             f"{', '.join(DEFAULT_DROP_FLAGS)})")
    parser.add_argument("--drop-flag", action="append", default=[], metavar="FLAG",
                        type=Checked(_flag),
                        help="also drop rows with FLAG (repeatable)")
    parser.add_argument("--finish", default=None, metavar="LIST", type=Checked(_finishes),
                        help=f"keep only these finish reasons, comma-separated "
                             f"({','.join(FINISH_REASONS)}; default all)")
    parser.add_argument("--max-length", type=Whole(1, MAX_LENGTH), default=None, metavar="N",
                        help="report rows a trainer run at max length N would cut or drop")


def row_filter_from(args: argparse.Namespace) -> RowFilter:
    """The filter the arguments describe (ConfigError for an unknown flag or reason)."""
    return RowFilter.build(keep_flags=args.keep_flag, drop_flags=args.drop_flag,
                           finish=args.finish)


def _flag(text: str) -> str:
    RowFilter.build(keep_flags=[text])  # ConfigError names an unknown flag
    return text


def _finishes(text: str) -> list[str]:
    reasons = text.split(",")
    RowFilter.build(finish=reasons)  # ConfigError names an unknown reason
    return reasons

"""The ``eagle-tui`` command: the dashboard with no verb, headless verbs otherwise.

Each verb is the module of the same name in this package and exposes
``add_arguments(parser)`` and ``run(args) -> int``; this file only routes, and
imports a verb's module only when that verb is used, so ``eagle-tui sim`` never
pays for Textual or transformers.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from eagle_tui.tui import dashboard, literal

# verb -> (module, one-line help). Order is the order `--help` lists them in.
VERBS: dict[str, str] = {
    "demo": "simulated server + small capture batch + the dashboard on them",
    "status": "one JSON snapshot of every known server and batch (scripts)",
    "sim": "run the simulated SGLang server (for demos and tests)",
    "capture": "capture exact-token training rows from SGLang servers",
    "batches": "list detached capture batches, or show one",
    "pause": "pause a detached batch (in-flight requests finish)",
    "resume": "resume a paused batch, or restart an interrupted one",
    "stop": "stop a detached batch, draining in-flight requests",
    "inspect": "print one captured sample, decoded, with its flags",
    "stats": "counts per flag and finish reason, length percentiles",
    "export": "write batches as a speculators / SpecForge / parquet training file, ids exact",
    "watch": "watch a server start up; exit 0 when ready, non-zero with a diagnosis",
}


def _load(verb: str) -> ModuleType:
    return importlib.import_module(f"eagle_tui.tui.cli.{verb}")


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """A parser whose sub-commands are the verbs; only the chosen verb's module is imported."""
    parser = argparse.ArgumentParser(
        prog="eagle-tui",
        description="Capture exact-token EAGLE-3 training data from SGLang and watch it.",
    )
    dashboard.add_arguments(parser)
    sub = parser.add_subparsers(
        dest="verb", metavar="VERB", help="with no verb, the dashboard opens"
    )
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for verb, help_text in VERBS.items():
        verb_parser = sub.add_parser(verb, help=help_text, description=help_text)
        if verb == chosen:
            _load(verb).add_arguments(verb_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``eagle-tui`` console script."""
    literal.install(textual=False)  # Rich output shows control characters, never runs them
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args_list)
    args = parser.parse_args(args_list)
    if args.verb is None:
        return dashboard.run(args)
    result: int = _load(args.verb).run(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())

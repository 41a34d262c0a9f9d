"""The ``eagle-tui`` command: the dashboard with no verb, headless verbs otherwise.

Each verb lives in the module that owns its job and exposes
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

# verb -> (module, one-line help). Order is the order `--help` lists them in.
VERBS: dict[str, tuple[str, str]] = {
    "sim": ("core.sim.cli", "run the simulated SGLang server (for demos and tests)"),
}


def _load(verb: str) -> ModuleType:
    return importlib.import_module(VERBS[verb][0])


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """A parser whose sub-commands are the verbs; only the chosen verb's module is imported."""
    parser = argparse.ArgumentParser(
        prog="eagle-tui",
        description="Capture exact-token EAGLE-3 training data from SGLang and watch it.",
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for verb, (_, help_text) in VERBS.items():
        verb_parser = sub.add_parser(verb, help=help_text, description=help_text)
        if verb == chosen:
            _load(verb).add_arguments(verb_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``eagle-tui`` console script."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args_list)
    args = parser.parse_args(args_list)
    if args.verb is None:
        parser.print_help()
        return 2
    result: int = _load(args.verb).run(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())

"""The ``eagle-tui`` command: the dashboard with no verb, headless verbs otherwise.

Each verb is the module of the same name in this package and exposes
``add_arguments(parser)`` and ``run(args) -> int``; this file only routes, and
imports a verb's module only when that verb is used, so ``eagle-tui sim`` never
pays for Textual or transformers.

Output read by a program that stops early (``eagle-tui batches | head -4``) is not an
error: when stdout's reader has gone, every verb ends quietly with status 141 (128 +
SIGPIPE, what the shell reports for a program that pipe killed), never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from types import ModuleType

from eagle_tui.core.argtypes import OneLineParser
from eagle_tui.tui import dashboard

# verb -> (module, one-line help). Order is the order `--help` lists them in.
VERBS: dict[str, str] = {
    "demo": "simulated server + small capture batch + the dashboard on them",
    "status": "one look at every known server and batch, as text (--json: one JSON object)",
    "sim": "run the simulated SGLang server (for demos and tests)",
    "capture": "capture exact-token training rows from SGLang servers",
    "batches": "list detached capture batches, or show one",
    "pause": "pause a detached batch (in-flight requests finish)",
    "resume": "resume a paused batch, or restart an interrupted one",
    "stop": "stop a detached batch, draining in-flight requests",
    "inspect": "print one captured sample, decoded, with its flags",
    "stats": "counts per flag and finish reason, length percentiles",
    "accept": "measure a drafter's acceptance: replay prompts on a speculative server (A/B)",
    "export": "write batches as a speculators / SpecForge / parquet training file, ids exact",
    "watch": "watch a server start up; exit 0 when ready, non-zero with a diagnosis",
    "diagnose": "one look at a server: processes, stacks, peers, GPUs, orphans (for an issue)",
}


def _load(verb: str) -> ModuleType:
    return importlib.import_module(f"eagle_tui.tui.cli.{verb}")


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """A parser whose sub-commands are the verbs; only the chosen verb's module is imported."""
    parser = OneLineParser(
        prog="eagle-tui",
        description="Capture exact-token EAGLE-3 training data from SGLang and watch it.",
    )
    dashboard.add_arguments(parser)
    sub = parser.add_subparsers(
        dest="verb", metavar="VERB", help="with no verb, the dashboard opens"
    )
    chosen = chosen_verb(argv)
    for verb, help_text in VERBS.items():
        verb_parser = sub.add_parser(verb, help=help_text, description=help_text)
        if verb == chosen:
            _load(verb).add_arguments(verb_parser)
    return parser


def chosen_verb(argv: Sequence[str]) -> str | None:
    """The verb ``argv`` names, skipping the dashboard options and their values (the first
    word that is not an option may be a value: ``--theme eagle-dark stats``)."""
    found = _dashboard_scan(argv)
    if found is None:  # a bad value, maybe of the verb's own option (`watch --url BAD`)
        return argv[0] if argv and argv[0] in VERBS else None
    return found.verb if found.verb in VERBS else None


def _dashboard_scan(argv: Sequence[str]) -> argparse.Namespace | None:
    """The dashboard options in ``argv`` and the first word after them (``verb``); None
    when they do not parse (the full parser then says why)."""
    scan = argparse.ArgumentParser(prog="eagle-tui", add_help=False, exit_on_error=False)
    dashboard.add_arguments(scan)
    scan.add_argument("verb", nargs="?")
    try:
        found, _ = scan.parse_known_args(list(argv))
    except argparse.ArgumentError:
        return None
    return found


def options_before_verb(argv: Sequence[str], verb: str) -> list[str]:
    """Options given before ``verb`` (but help): the verb would drop them unsaid."""
    before = list(argv[: list(argv).index(verb)]) if verb in argv else []
    options = [word.split("=", 1)[0] for word in before if word.startswith("-")]
    return [option for option in options if option not in ("-h", "--help")]


EXIT_OUTPUT_CLOSED = 128 + signal.SIGPIPE
"""Status when stdout's reader went away before everything was written."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``eagle-tui`` console script."""
    try:
        try:
            return _route(argv)
        finally:  # what is still buffered goes now, where a closed pipe can be caught
            sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_OUTPUT_CLOSED


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush at exit does not report
    the closed pipe again (the recipe of the Python docs, "Note on SIGPIPE")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def _route(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    verb = chosen_verb(args_list)
    misplaced = options_before_verb(args_list, verb) if verb else []
    if verb and misplaced:
        print(f"eagle-tui: {' '.join(misplaced)} comes before the verb {verb!r}, where only "
              f"the dashboard's options go; give {verb}'s options after it "
              f"(eagle-tui {verb} --help)", file=sys.stderr)
        return 2
    parser = build_parser(args_list)
    args = parser.parse_args(args_list)
    if args.verb is None:
        return dashboard.run(args)
    result: int = _load(args.verb).run(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())

"""``eagle-tui diagnose [--url URL] [--pid PID] [--log FILE] [--json]``: one look at a server.

Prints the whole evidence bundle (``core.health.diagnose``): phase and verdict, the log's last
lines, each process's state, CPU, I/O, files and wait, every rank's Python stack (py-spy),
the distributed-init peers, GPU processes, leftover processes of earlier runs and the
server's arguments, as text to paste into an issue (credentials and query strings
redacted), or one JSON object with ``--json``. With nothing given it looks at the one
SGLang server on this host. It takes about two seconds (rates need two samples).

Exit codes: 0 the bundle was printed; 2 usage (a bad option, no server found, several found).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from eagle_tui.core.argtypes import FileIn, Whole
from eagle_tui.core.errors import NoServer
from eagle_tui.core.health.diagnose import Bundle, Target, collect, resolve
from eagle_tui.tui.options import server_url

EXIT_OK = 0
EXIT_USAGE = 2



def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``diagnose`` options."""
    parser.add_argument("--url", type=server_url, help="the server's base URL")
    parser.add_argument("--pid", type=Whole(1, 1 << 22), help="PID of the server's main process")
    parser.add_argument("--log", type=FileIn("server's log file"), metavar="FILE",
                        help="the server's log file")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--no-stacks", action="store_true",
                        help="do not run py-spy (no ptrace of the server's processes)")



def run(args: argparse.Namespace) -> int:
    """Collect and print the bundle."""
    if args.log is not None and not args.log.is_file():
        print(f"eagle-tui diagnose: --log {args.log}: no such file; give the server's log "
              "file (or leave --log out)", file=sys.stderr)
        return EXIT_USAGE
    try:
        target = resolve(Target(args.url, args.pid, args.log))
    except NoServer as exc:
        print(f"eagle-tui diagnose: {exc}", file=sys.stderr)
        return EXIT_USAGE
    bundle = asyncio.run(collect(target, take_stacks=not args.no_stacks))
    _print(bundle, as_json=args.json)
    return EXIT_OK


def _print(bundle: Bundle, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(bundle.as_json(), indent=2, default=str))
        return
    for line in bundle.lines():
        print(line)

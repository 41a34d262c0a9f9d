"""``eagle-tui demo``: a simulated server, a small capture batch and the dashboard on them.

What the demo starts and how it cleans up is ``eagle_tui.tui.demo``'s job; this is the verb.
"""

from __future__ import annotations

import argparse
import logging

from eagle_tui.core.argtypes import Checked, Number, Whole
from eagle_tui.tui.dashboard import add_refresh_argument, theme_name

MAX_TIME_SCALE = 1000.0
MAX_DEMO_PROMPTS = 100_000
MAX_TOKENS_PER_S = 1_000_000.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's options."""
    parser.add_argument(
        "--time-scale",
        type=Number(0, MAX_TIME_SCALE),
        default=1.0,
        help="server start-up speed (1: about 35 s; 0: instant)",
    )
    parser.add_argument("--prompts", type=Whole(1, MAX_DEMO_PROMPTS), default=400,
                        help="prompts in the demo batch")
    parser.add_argument(
        "--tokens-per-s", type=Number(0, MAX_TOKENS_PER_S), default=40.0,
        help="decode speed of each simulated request (0: as fast as possible)"
    )
    parser.add_argument("--theme", default="eagle-dark", type=Checked(theme_name))
    parser.add_argument("--no-mouse", action="store_true")
    add_refresh_argument(parser)
    parser.add_argument("--keep", action="store_true", help="keep the demo's batch and logs")
    parser.add_argument(
        "--rank-hang", choices=("fifo", "stop"), default=None,
        help="the server's rank hangs for real (fifo: blocked opening its weight shard, a "
        "named pipe; stop: SIGSTOPped): the Server card says so from the processes",
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR")
    )


def run(args: argparse.Namespace) -> int:
    """Paint the dashboard, start the demo behind it, clean up however it ends."""
    from eagle_tui.core.logsetup import log_to_file
    from eagle_tui.tui.demo import DemoApp, finish_demo, prepare_demo

    log_to_file(None, args.log_level)
    demo = prepare_demo(args)
    try:
        app = DemoApp(demo, args)
        app.run(mouse=not args.no_mouse)
        logging.getLogger(__name__).info("demo: the dashboard has quit")
        return app.return_code or 0
    finally:
        finish_demo(demo, keep=args.keep)  # at once if quitting did it already
        if args.keep:
            print(f"eagle-tui demo: batch and logs kept in {demo.workdir}")

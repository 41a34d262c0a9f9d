"""``eagle-tui demo``: a simulated server, a small capture batch and the dashboard on them.

What the demo starts and how it cleans up is ``eagle_tui.tui.demo``'s job; this is the verb.
"""

from __future__ import annotations

import argparse

from eagle_tui.tui.dashboard import add_refresh_argument
from eagle_tui.tui.demo import demo_options, demo_sources, start_batch, start_demo, stop_demo


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's options."""
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="server start-up speed (1: about 35 s; 0: instant)",
    )
    parser.add_argument("--prompts", type=int, default=400, help="prompts in the demo batch")
    parser.add_argument(
        "--tokens-per-s", type=float, default=40.0, help="decode speed of each simulated request"
    )
    parser.add_argument("--theme", default="eagle-dark")
    parser.add_argument("--no-mouse", action="store_true")
    add_refresh_argument(parser)
    parser.add_argument("--keep", action="store_true", help="keep the demo's batch and logs")
    parser.add_argument(
        "--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR")
    )


def run(args: argparse.Namespace) -> int:
    """Start the demo, run the dashboard, clean up; returns the exit code."""
    from eagle_tui.tui.app import EagleApp
    from eagle_tui.tui.logsetup import configure_logging

    configure_logging(None, args.log_level)
    demo = start_demo(args)
    try:
        app = EagleApp(demo_options(demo, args), sources=demo_sources(demo))
        start_batch(demo, app, args)
        app.run(mouse=not args.no_mouse)
        return app.return_code or 0
    finally:
        stop_demo(demo, keep=args.keep)



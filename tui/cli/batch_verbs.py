"""What the ``batches``/``pause``/``resume``/``stop`` verbs share: finding a batch, exits.

Exit status of the verbs: 0 done; 2 no such batch (or a bad argument); 3 the worker did
not answer or could not be started; 4 another worker holds the output directory; 5 the
batch is not in a state where that makes sense (pausing a finished batch, ...).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TextIO

from eagle_tui.core.argtypes import Line
from eagle_tui.core.batches.detach import Launched, launch_detached
from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.batches.survey import BatchView, survey
from eagle_tui.core.capture.config import CaptureConfig
from eagle_tui.core.errors import (
    BatchLocked,
    EagleError,
    WorkerStartFailed,
    WorkerUnreachable,
    WrongState,
)
from eagle_tui.core.text import terminal_safe

EXIT_OK, EXIT_USAGE, EXIT_WORKER, EXIT_LOCKED, EXIT_STATE = 0, 2, 3, 4, 5


EXIT_HELP = (f"exit status: {EXIT_OK} done; {EXIT_USAGE} no such batch or a bad argument; "
             f"{EXIT_WORKER} the worker did not answer or could not start; {EXIT_LOCKED} "
             f"another worker holds the output directory; {EXIT_STATE} the batch is in no "
             "state for this (e.g. it is done)")


def add_batch_argument(parser: argparse.ArgumentParser) -> None:
    """The positional BATCH argument, and the exit statuses at the end of ``--help``."""
    parser.add_argument("batch", metavar="BATCH",
                        help="batch id (or a unique part of it), name, or output directory")
    parser.epilog = EXIT_HELP


async def find_view(ref: str, registry: Registry | None = None) -> BatchView:
    """The batch ``ref`` names, surveyed now; BatchNotFound when none matches."""
    return await survey((registry or Registry()).find(ref))


def exit_code_for(error: EagleError) -> int:
    """The exit status that reports ``error``."""
    if isinstance(error, WrongState):
        return EXIT_STATE
    if isinstance(error, BatchLocked):
        return EXIT_LOCKED
    if isinstance(error, (WorkerUnreachable, WorkerStartFailed)):
        return EXIT_WORKER
    return EXIT_USAGE  # BatchNotFound, ControlRejected, ConfigError, ...


def run_verb(action: Callable[[], Coroutine[Any, Any, int]], *, err: Any = None) -> int:
    """Run an async verb body; report an EagleError as one line on stderr."""
    try:
        return asyncio.run(action())
    except EagleError as e:
        print(f"eagle-tui: {terminal_safe(str(e))}", file=err or sys.stderr)
        return exit_code_for(e)
    except KeyboardInterrupt:
        return 130


async def live_view(ref: str, verb: str) -> BatchView:
    """The batch ``ref`` names, whose worker runs; WrongState (saying what to do) when none
    does, so ``verb`` cannot be sent."""
    view = await find_view(ref)
    if not view.live:
        raise not_running(view, verb)
    return view


def not_running(view: BatchView, verb: str) -> WrongState:
    """The error for a verb that needs a live worker."""
    r = view.record
    hint = {"interrupted": f"its worker died; `eagle-tui resume {r.id}` restarts it",
            "stopped": f"`eagle-tui resume {r.id}` continues it",
            "failed": f"{view.detail or 'see ' + r.log}; `eagle-tui resume {r.id}` retries it",
            "done": f"nothing left to {verb}"}.get(view.state, f"see {r.log}")
    return WrongState(f"cannot {verb} batch {r.id} ({r.name}): it is {view.state}; {hint}")


EXIT_STARTED, EXIT_LAUNCH_USAGE, EXIT_START_FAILED = 0, 2, 3  # and EXIT_LOCKED
"""Exit statuses of ``capture --detach``."""


def add_detach_arguments(parser: argparse._ActionsContainer) -> None:
    """Add ``--detach`` and ``--name`` to the capture verb's parser (or one of its groups)."""
    parser.add_argument(
        "--detach", action="store_true",
        help="run the batch in a background worker that outlives this terminal; follow and "
        "control it with `eagle-tui batches|pause|resume|stop`")
    parser.add_argument("--name", default=None, type=Line("a batch name"),
                        help="name of the detached batch (default: the output directory's)")


def run_detached(config: CaptureConfig, *, name: str | None = None,
                 registry: Registry | None = None, out: TextIO | None = None,
                 err: TextIO | None = None) -> int:
    """``capture --detach``: start the batch, print how to follow it; the exit status."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        launched = launch_detached(config, name=name, registry=registry)
    except BatchLocked as e:
        print(f"eagle-tui: {terminal_safe(str(e))}", file=err)
        return EXIT_LOCKED
    except WorkerStartFailed as e:  # quotes the worker log: multi-line
        print(f"eagle-tui: {terminal_safe(str(e), multiline=True)}", file=err)
        return EXIT_START_FAILED
    except EagleError as e:
        print(f"eagle-tui: {terminal_safe(str(e))}", file=err)
        return EXIT_LAUNCH_USAGE
    print(describe_launch(launched), file=out)
    return EXIT_STARTED


def describe_launch(launched: Launched) -> str:
    """What the user needs after starting a batch: where it is and how to drive it."""
    r = launched.record
    verb = "started" if launched.started else "is starting (still loading)"
    return terminal_safe(
        f"batch {r.id} ({r.name}) {verb}, worker pid {r.pid}\n"
        f"  output   {r.out_dir}\n  log      {r.log}\n  control  {r.socket}\n"
        f"  follow with `eagle-tui batches`; `eagle-tui pause|resume|stop {r.id}`",
        multiline=True)

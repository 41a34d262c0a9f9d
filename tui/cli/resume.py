"""``eagle-tui resume BATCH [--server URL ...]``: continue a paused batch, or restart one.

A paused batch (its worker runs) is resumed at once. A batch whose worker ended before
finishing (interrupted, stopped, failed) gets a new detached worker that continues it:
rows already in complete shards are skipped, everything else is captured exactly once.
The API key comes from ``EAGLE_TUI_API_KEY``; ``--server`` replaces the recorded servers
(a moved server, or URLs that carry credentials, which the registry never stores).
Exit status: see ``core.batches.cli_common``.
"""

from __future__ import annotations

import argparse

from eagle_tui.core.batches.control_client import BatchClient
from eagle_tui.core.batches.detach import relaunch
from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.batches.survey import RESUMABLE_STATES, BatchView
from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.errors import WrongState
from eagle_tui.tui.cli.batch_verbs import (
    EXIT_OK,
    add_batch_argument,
    describe_launch,
    find_view,
    run_verb,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``resume`` verb's arguments."""
    add_batch_argument(parser)
    parser.add_argument("--server", action="append", default=None, metavar="URL",
                        help="send to this server instead of the recorded ones (repeatable)")


def run(args: argparse.Namespace) -> int:
    """Resume or restart one batch."""
    servers = tuple(args.server) if args.server else None
    return run_verb(lambda: _resume(args.batch, servers))


async def _resume(ref: str, servers: tuple[str, ...] | None) -> int:
    registry = Registry()
    view = await find_view(ref, registry)
    if view.state in ("paused", "running", "stopping"):
        return await _unpause(view)
    if view.state not in RESUMABLE_STATES:
        raise WrongState(f"batch {view.record.id} is {view.state}; nothing to resume"
                         + ("" if view.state == "done" else f" (see {view.record.log})"))
    if view.record.needs_secrets and not servers:
        print("note: this batch was started with an API key or credentials in a server URL; "
              "they are not stored: set EAGLE_TUI_API_KEY / pass --server again if needed")
    launched = relaunch(view.record, registry, servers=servers)
    print(describe_launch(launched))
    return EXIT_OK


async def _unpause(view: BatchView) -> int:
    if view.state == BatchState.STOPPING:
        raise WrongState(f"batch {view.record.id} is stopping; resume it once it has stopped")
    async with BatchClient(view.record.socket) as client:
        answer = await client.resume()
    print(f"batch {view.record.id} is {answer.state}")
    return EXIT_OK

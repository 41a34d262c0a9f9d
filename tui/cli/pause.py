"""``eagle-tui pause BATCH``: send no new requests; those in flight finish.

The worker keeps running and its control socket answering; ``eagle-tui resume BATCH``
continues. Exit status: see ``tui.cli.batch_verbs``.
"""

from __future__ import annotations

import argparse

from eagle_tui.core.batches.control_client import BatchClient
from eagle_tui.core.text import terminal_safe
from eagle_tui.tui.cli.batch_verbs import EXIT_OK, add_batch_argument, live_view, run_verb


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``pause`` verb's arguments."""
    add_batch_argument(parser)


def run(args: argparse.Namespace) -> int:
    """Pause one batch."""
    return run_verb(lambda: _pause(args.batch))


async def _pause(ref: str) -> int:
    view = await live_view(ref, "pause")
    async with BatchClient(view.record.socket) as client:
        answer = await client.pause()
        in_flight = (await client.status()).progress.in_flight
    print(terminal_safe(f"batch {view.record.id} is {answer.state}; {in_flight} requests "
                        f"in flight will finish. `eagle-tui resume {view.record.id}` "
                        "continues it"))
    return EXIT_OK

"""``eagle-tui stop BATCH [--grace S] [--abort] [--no-wait]``: stop a running batch.

No new requests go out; those in flight may finish for the grace period (default: the
batch's own, 30 s unless set), then they are aborted. ``--abort`` aborts them at once.
Everything finished is written to complete shards and the manifest, so ``eagle-tui resume
BATCH`` later continues exactly where it stopped. Waits for the worker to exit unless
``--no-wait``. Exit status: see ``tui.cli.batch_verbs``.
"""

from __future__ import annotations

import argparse

from eagle_tui.core.argtypes import seconds
from eagle_tui.core.batches.api import End
from eagle_tui.core.batches.control_client import BatchClient
from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.text import terminal_safe
from eagle_tui.tui.cli.batch_table import rows_done
from eagle_tui.tui.cli.batch_verbs import EXIT_OK, add_batch_argument, live_view, run_verb


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``stop`` verb's arguments."""
    add_batch_argument(parser)
    parser.add_argument("--grace", type=seconds(zero=True), default=None, metavar="S",
                        help="seconds in-flight requests may take to finish before abort")
    parser.add_argument("--abort", action="store_true",
                        help="abort in-flight requests at once (their rows are redone on resume)")
    parser.add_argument("--no-wait", action="store_true",
                        help="return once the worker accepted the stop")


def run(args: argparse.Namespace) -> int:
    """Stop one batch."""
    return run_verb(lambda: _stop(args.batch, args.grace, args.abort, not args.no_wait))


def ended_line(batch_id: str, end: End) -> str:
    """How the stopped batch ended: what a resume continues, or nothing left (the stop came
    while its last rows were in flight, and they finished)."""
    rows = f"{rows_done(end.progress)} rows captured"
    if end.state == BatchState.DONE:
        return (f"batch {batch_id} done: {rows}; its last rows finished while it stopped, "
                "nothing is left to resume")
    return f"batch {batch_id} {end.state}: {rows}; `eagle-tui resume {batch_id}` continues it"


async def _stop(ref: str, grace_s: float | None, abort: bool, wait: bool) -> int:
    view = await live_view(ref, "stop")
    batch_id = view.record.id
    async with BatchClient(view.record.socket) as client:
        events = client.events(reconnect_s=0)
        await anext(events)  # subscribe before stopping so the end is not missed
        await client.stop(grace_s, abort=abort)
        print(f"batch {batch_id} is stopping" + ("" if wait else "; not waiting"))
        if not wait:
            await events.aclose()
            return EXIT_OK
        async for event in events:
            if isinstance(event.data, End):
                print(terminal_safe(ended_line(batch_id, event.data)))
                return EXIT_OK
    print(f"batch {batch_id}'s worker exited; `eagle-tui batches {batch_id}` shows its state")
    return EXIT_OK

"""``eagle-tui batches [BATCH] [--json] [--forget]``: list detached batches, or show one.

Without BATCH: one line per registered batch with its state (running, paused, stopping,
done, stopped, failed, interrupted, ...), rows, failures, rates and ETA. With BATCH: that
batch in detail (servers, recent errors by kind, shards). ``--json`` prints the same as
JSON; ``--forget`` removes a finished batch's record (its directory stays). Exit status:
see ``tui.cli.batch_verbs``.
"""

from __future__ import annotations

import argparse
import sys

import msgspec

from eagle_tui.core.batches.api import StatusDoc
from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.batches.survey import BatchView, survey, survey_all
from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.errors import WrongState
from eagle_tui.core.wire import printable_json
from eagle_tui.tui.cli.batch_table import counts_json, details, record_json, table
from eagle_tui.tui.cli.batch_verbs import EXIT_OK, run_verb


class BatchDoc(msgspec.Struct, frozen=True, kw_only=True):
    """One batch as ``--json`` prints it: its state, its counts (``counts_json``), its
    registry record (``record_json``) and, while a worker answers, its ``/status``."""

    id: str
    name: str
    state: BatchState
    detail: str | None
    counts: dict[str, object]
    record: dict[str, object]
    status: StatusDoc | None

    @classmethod
    def of(cls, view: BatchView) -> BatchDoc:
        """The document of one surveyed batch."""
        return cls(id=view.record.id, name=view.record.name, state=view.state,
                   detail=view.detail, counts=counts_json(view), record=record_json(view),
                   status=view.live_status)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``batches`` verb's arguments."""
    parser.add_argument("batch", metavar="BATCH", nargs="?",
                        help="show this batch in detail (id, unique part of it, name or dir)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--forget", action="store_true",
                        help="remove BATCH's record (not while it runs; its files stay)")


def run(args: argparse.Namespace) -> int:
    """List or show batches."""
    return run_verb(lambda: _run(args))


async def _run(args: argparse.Namespace) -> int:
    registry = Registry()
    if args.batch is None:
        views = await survey_all(registry.all())
        if args.json:
            print(_indented([BatchDoc.of(v) for v in views]))
        elif views:
            print(table(views))
        else:
            print(f"no batches yet (registry {registry.root}); start one with "
                  "`eagle-tui capture ... --detach`")
        return EXIT_OK
    view = await survey(registry.find(args.batch))
    if args.forget:
        return _forget(registry, view)
    print(_indented(BatchDoc.of(view)) if args.json else details(view))
    return EXIT_OK


def _forget(registry: Registry, view: BatchView) -> int:
    if view.live:
        raise WrongState(f"batch {view.record.id} is {view.state}; stop it before forgetting it")
    registry.forget(view.record.id)
    print(f"forgot batch {view.record.id}; its files stay in {view.record.out_dir}",
          file=sys.stdout)
    return EXIT_OK


def _indented(document: BatchDoc | list[BatchDoc]) -> str:
    return printable_json(document, indent=1)

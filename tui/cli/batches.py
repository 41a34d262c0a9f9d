"""``eagle-tui batches [BATCH] [--json] [--forget]``: list detached batches, or show one.

Without BATCH: one line per registered batch with its state (running, paused, stopping,
done, stopped, failed, interrupted, ...), rows, failures, rates and ETA. With BATCH: that
batch in detail (servers, recent errors by kind, shards). ``--json`` prints the same as
JSON; ``--forget`` removes a finished batch's record (its directory stays). Exit status:
see ``tui.cli.batch_verbs``.

``--slurm-job ID [--runs DIR]``: the tasks of a Slurm array of ``capture --shard auto``
instead (``core.batches.slurmjob``): state, node and reason from ``squeue``, each slice's
rows and requeues from its manifest under DIR (default: the current directory).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import msgspec

from eagle_tui.core.argtypes import Checked, DirIn
from eagle_tui.core.batches.api import StatusDoc
from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.batches.slurmjob import follow
from eagle_tui.core.batches.survey import BatchView, survey, survey_all
from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.errors import ConfigError, WrongState
from eagle_tui.core.wire import printable_json
from eagle_tui.tui.cli.batch_table import (
    BatchCounts,
    batch_counts,
    details,
    record_json,
    slurm_json,
    slurm_table,
    table,
)
from eagle_tui.tui.cli.batch_verbs import EXIT_OK, run_verb
from eagle_tui.tui.options import slurm_job_id


class BatchDoc(msgspec.Struct, frozen=True, kw_only=True):
    """One batch as ``--json`` prints it: its state, its counts (``batch_counts``), its
    registry record (``record_json``) and, while a worker answers, its ``/status``."""

    id: str
    name: str
    state: BatchState
    detail: str | None
    counts: BatchCounts
    record: dict[str, object]
    status: StatusDoc | None

    @classmethod
    def of(cls, view: BatchView) -> BatchDoc:
        """The document of one surveyed batch."""
        return cls(id=view.record.id, name=view.record.name, state=view.state,
                   detail=view.detail, counts=batch_counts(view), record=record_json(view),
                   status=view.live_status)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``batches`` verb's arguments."""
    parser.add_argument("batch", metavar="BATCH", nargs="?",
                        help="show this batch in detail (id, unique part of it, name or dir)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--forget", action="store_true",
                        help="remove BATCH's record (not while it runs; its files stay)")
    parser.add_argument("--slurm-job", metavar="ID", type=Checked(slurm_job_id),
                        help="show the tasks of this Slurm array of capture --shard auto "
                             "(squeue, and the slice directories under --runs)")
    parser.add_argument("--runs", metavar="DIR", type=DirIn("slice directory"), action="append",
                        help="with --slurm-job: a slice directory, or the directory holding "
                             "them (repeat; default: the current directory)")



def run(args: argparse.Namespace) -> int:
    """List or show batches."""
    return run_verb(lambda: _run(args))


async def _run(args: argparse.Namespace) -> int:
    if args.slurm_job is not None:
        return _slurm(args)
    if args.runs:
        raise ConfigError("--runs goes with --slurm-job ID")
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


def _slurm(args: argparse.Namespace) -> int:
    if args.batch is not None or args.forget:
        raise ConfigError("--slurm-job shows a Slurm job; give no BATCH and no --forget with it")
    view = follow(args.slurm_job, args.runs or [Path.cwd()])
    print(printable_json(slurm_json(view), indent=1)
          if args.json else slurm_table(view))
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

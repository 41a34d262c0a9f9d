"""Which server this is: its signature (the key of its start-up history), its deployment
(ranks, nodes) and the ranks lagging behind the others, from the log and the command line."""

from __future__ import annotations

from eagle_tui.core.health.logtrack import LogTracker
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.ranks import Topology, rank_sort_key, topology_fields_from_argv
from eagle_tui.core.health.signature import (
    flag_values,
    signature_from_argv,
    signature_from_server_args,
)
from eagle_tui.core.health.stall import silence
from eagle_tui.core.health.steps import STEP_PHASE
from eagle_tui.core.proc.report import ProcessReport

LAGGING_AFTER_S = 10.0  # ranks interleave; name laggards only once the log has paused

Lagging = tuple[tuple[str, ...], tuple[tuple[str, str], ...]]
"""Ranks behind the others, and where each is (``at loading_weights``, ``never logged``)."""


def server_signature(explicit: str | None, log: LogTracker | None,
                     process: ProcessReport | None) -> str | None:
    """The server signature known so far (explicit, from the log, or the command line)."""
    if explicit is not None:
        return explicit
    if log is not None:
        found = signature_from_server_args(log.server_args)
        if found is not None:
            return found
    if process is not None and process.cmdline:
        return signature_from_argv(process.cmdline.split())
    return None


def topology(log: LogTracker | None, process: ProcessReport | None) -> Topology:
    """The deployment: the log's ``server_args``, else the command line."""
    fields: dict[str, str] = {}
    if process is not None and process.cmdline:
        fields.update(topology_fields_from_argv(flag_values(process.cmdline.split())))
    if log is not None:
        fields.update({k: v for k, v in log.server_args.items() if v != "None"})
    return Topology.from_fields(fields)


def lagging_ranks(log: LogTracker | None, process: ProcessReport | None, started: float,
                  now: float) -> Lagging:
    """The ranks behind the others once the log has paused (none while it streams)."""
    if log is None or log.phase is None or log.phase == Phase.READY:
        return (), ()
    quiet = silence(log, started, now)
    if quiet < LAGGING_AFTER_S and not log.crash.failed:
        return (), ()
    deployment = topology(log, process)
    behind = log.ranks.behind(deployment)
    where = {
        rank: f"at {STEP_PHASE[step]}" if step is not None else "never logged"
        for rank, step in behind.items()
    }
    if not where and any(f.event.kind == "dist_timeout" for f in log.fatals):
        # The store timed out waiting for peers: the ranks it waited for run elsewhere.
        where = dict.fromkeys(deployment.other_node_ranks(), "on another node")
    names = tuple(sorted(where, key=rank_sort_key))
    return names, tuple((name, where[name]) for name in names)

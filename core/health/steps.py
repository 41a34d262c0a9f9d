"""Steps: where inside a start-up phase the log stopped, and how long each may stay silent.

A phase is too coarse to time a hang: in distributed init, waiting for every node to start
can take minutes (223 s in a healthy 2-node start of the corpus) while creating the NCCL
communicators takes seconds, and a hang there is the usual cross-node failure. So the
last start-up line seen names a *step*, and each step has its own silence limit, derived
from the longest silences measured in the healthy logs of tests/fixtures/serverlogs
(docs/startup-diagnosis.md has the table). Steps that print progress bars are judged by
their own pace instead: several times the longest gap between two updates so far (or
tqdm's own seconds per step), never less than the step's floor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from eagle_tui.core.health.phase import Phase
from eagle_tui.core.serverlog import events as ev


class Step(StrEnum):
    """A point in a start-up, in order; each belongs to one phase."""

    LAUNCHING = "launching"  # server_args printed: imports, tokenizer, model config
    DIST_BEGIN = "dist_begin"  # Init torch distributed begin: every rank, every node, joins
    DIST_NCCL = "dist_nccl"  # nccl version announced: NCCL communicators being created
    DIST_COMM = "dist_comm"  # NCCL's own bootstrap/communicator lines (NCCL_DEBUG=INFO)
    DIST_ALLREDUCE = "dist_allreduce"  # custom all-reduce set up, or disabled across nodes
    DIST_END = "dist_end"  # Init torch distributed ends
    WEIGHTS_BEGIN = "weights_begin"  # Load weight begin: the model is built, files looked up
    WEIGHTS_FILES = "weights_files"  # weight files found: reading (or downloading) begins
    WEIGHTS_BAR = "weights_bar"  # the checkpoint-shard bar is moving
    WEIGHTS_BAR_DONE = "weights_bar_done"  # every shard read: processing until Load weight end
    WEIGHTS_END = "weights_end"  # Load weight end (on some ranks)
    KV = "kv"  # KV cache allocated, memory pool, scheduler limits
    GRAPHS_BEGIN = "graphs_begin"  # graph capture began, no bar yet
    GRAPHS_BAR = "graphs_bar"  # a capture bar is moving
    GRAPHS_END = "graphs_end"  # a capture pass ended (another may follow)
    WARMUP = "warmup"  # uvicorn up: the warm-up request runs
    READY = "ready"


STEP_ORDER: tuple[Step, ...] = tuple(Step)
_RANK = {step: index for index, step in enumerate(STEP_ORDER)}

STEP_PHASE: Mapping[Step, Phase] = MappingProxyType(
    {
        Step.LAUNCHING: Phase.LAUNCHING,
        Step.DIST_BEGIN: Phase.DISTRIBUTED_INIT,
        Step.DIST_NCCL: Phase.DISTRIBUTED_INIT,
        Step.DIST_COMM: Phase.DISTRIBUTED_INIT,
        Step.DIST_ALLREDUCE: Phase.DISTRIBUTED_INIT,
        Step.DIST_END: Phase.DISTRIBUTED_INIT,
        Step.WEIGHTS_BEGIN: Phase.LOADING_WEIGHTS,
        Step.WEIGHTS_FILES: Phase.LOADING_WEIGHTS,
        Step.WEIGHTS_BAR: Phase.LOADING_WEIGHTS,
        Step.WEIGHTS_BAR_DONE: Phase.LOADING_WEIGHTS,
        Step.WEIGHTS_END: Phase.LOADING_WEIGHTS,  # until every rank is done and KV begins
        Step.KV: Phase.ALLOCATING_KV,
        Step.GRAPHS_BEGIN: Phase.CAPTURING_GRAPHS,
        Step.GRAPHS_BAR: Phase.CAPTURING_GRAPHS,
        Step.GRAPHS_END: Phase.CAPTURING_GRAPHS,
        Step.WARMUP: Phase.WARMING_UP,
        Step.READY: Phase.READY,
    }
)

# Silence limits per step with default settings (docs/startup-diagnosis.md, "Measured
# silences"): about 1.5x the longest silence after that step in the corpus's healthy
# start-ups, rounded up to a minute; the short steps get 55 s, so that with a 1 s poll a
# hang there is flagged within a minute of its last line.
DEFAULT_STEP_LIMITS_S: Mapping[Step, float] = MappingProxyType(
    {
        Step.LAUNCHING: 120.0,
        Step.DIST_BEGIN: 360.0,
        Step.DIST_NCCL: 55.0,
        Step.DIST_COMM: 55.0,
        Step.DIST_ALLREDUCE: 55.0,
        Step.DIST_END: 55.0,
        Step.WEIGHTS_BEGIN: 90.0,
        Step.WEIGHTS_FILES: 55.0,
        Step.WEIGHTS_BAR: 360.0,
        Step.WEIGHTS_BAR_DONE: 360.0,
        Step.WEIGHTS_END: 55.0,
        Step.KV: 55.0,
        Step.GRAPHS_BEGIN: 600.0,
        Step.GRAPHS_BAR: 55.0,
        Step.GRAPHS_END: 55.0,
        Step.WARMUP: 55.0,
    }
)

STEP_WHAT: Mapping[Step, str] = MappingProxyType(
    {
        Step.LAUNCHING: "starting up (imports, tokenizer, model config)",
        Step.DIST_BEGIN: "waiting for every rank to join torch.distributed",
        Step.DIST_NCCL: "creating NCCL communicators",
        Step.DIST_COMM: "NCCL communicator init",
        Step.DIST_ALLREDUCE: "setting up all-reduce",
        Step.DIST_END: "between distributed init and weight loading",
        Step.WEIGHTS_BEGIN: "building the model before reading weights",
        Step.WEIGHTS_FILES: "reading or downloading the weight files (no shard read yet)",
        Step.WEIGHTS_BAR: "reading checkpoint shards",
        Step.WEIGHTS_BAR_DONE: "processing the loaded weights",
        Step.WEIGHTS_END: "waiting for every rank to finish loading weights",
        Step.KV: "allocating the KV cache",
        Step.GRAPHS_BEGIN: "capturing graphs (no progress bar yet)",
        Step.GRAPHS_BAR: "capturing graphs",
        Step.GRAPHS_END: "between graph captures",
        Step.WARMUP: "running the warm-up request",
        Step.READY: "ready",
    }
)


def step_rank(step: Step) -> int:
    """Position of ``step`` in the start-up order."""
    return _RANK[step]


def later_step(a: Step | None, b: Step) -> Step:
    """The further along of two steps (``a`` may be None)."""
    return b if a is None or _RANK[b] > _RANK[a] else a


_DIST_STEPS = {
    "begin": Step.DIST_BEGIN,
    "nccl": Step.DIST_NCCL,
    "comm": Step.DIST_COMM,
    "allreduce": Step.DIST_ALLREDUCE,
    "end": Step.DIST_END,
}


def step_of(event: ev.LogEvent, reached: Step | None) -> Step | None:
    """The step an event shows a rank has reached (None: it says nothing about progress).

    ``reached`` is how far the start-up already is: a bare tqdm bar means graph capture
    only once the weights are in.
    """
    match event:
        case ev.ServerArgsSeen():
            return Step.LAUNCHING
        case ev.DistributedInit(step=step):
            return _DIST_STEPS.get(step, Step.DIST_NCCL)
        case ev.WeightLoadBegin():
            return Step.WEIGHTS_BEGIN
        case ev.WeightFiles():
            return Step.WEIGHTS_FILES
        case ev.ShardProgress(done=done, total=total):
            return Step.WEIGHTS_BAR_DONE if total and done >= total else Step.WEIGHTS_BAR
        case ev.WeightLoadEnd():
            return Step.WEIGHTS_END
        case ev.KvCacheAllocated() | ev.MemoryPoolEnd() | ev.SchedulerLimits():
            return Step.KV
        case ev.GraphCaptureBegin():
            return Step.GRAPHS_BEGIN
        case ev.GraphCaptureProgress(labelled=labelled):
            # A bare tqdm bar is graph capture's once every shard is read (weights have
            # their own labelled bar); before that it says nothing.
            early = reached is None or step_rank(reached) < _RANK[Step.WEIGHTS_BAR_DONE]
            return None if not labelled and early else Step.GRAPHS_BAR
        case ev.GraphCaptureEnd():
            return Step.GRAPHS_END
        case ev.ServerProcessStarted() | ev.AppStartupComplete() | ev.PortBound():
            return Step.WARMUP
        case ev.ServerReady():
            return Step.READY
    return None


@dataclass
class BarPace:
    """The pace of one progress bar: when it last moved and its longest gap so far."""

    last_done: int | None = None
    last_at: float | None = None
    longest_gap_s: float = 0.0
    rate_s: float | None = None
    moves: int = 0

    def update(self, done: int | None, at: float, rate_s: float | None) -> None:
        """Record a bar line; only a change of ``done`` counts as a move."""
        if rate_s is not None:
            self.rate_s = rate_s
        if done is not None and done == self.last_done:
            return
        if self.last_at is not None:
            self.longest_gap_s = max(self.longest_gap_s, at - self.last_at)
            self.moves += 1
        self.last_done, self.last_at = done, at

    def limit(self, margin: float, floor: float) -> float | None:
        """``margin`` x the slowest step seen (gap or tqdm's s/it); None before any move."""
        if self.moves == 0 and self.rate_s is None:
            return None
        pace = max(self.longest_gap_s, self.rate_s or 0.0)
        return max(floor, margin * pace)

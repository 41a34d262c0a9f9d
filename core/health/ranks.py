"""Per-rank progress: how far each rank's log got, and which ranks fell behind.

Ranks are known by their tags (``TP3``, ``DP0 TP3``), by the CUDA device NCCL names
(``host:pid:tid [3] NCCL INFO …``, mapped to a rank through the ``ncclCommInitRank … rank N
… cudaDev D`` line when there is one, else through the node's place in the deployment), and
by the deployment's size (``tp_size``, ``nnodes``, ``node_rank``: a rank that never
printed a line is behind every other).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.steps import STEP_PHASE, Step, later_step, step_rank

_COMM_INIT = re.compile(r"ncclCommInitRank comm \S+ rank (\d+) nranks (\d+) cudaDev (\d+)")
_TP_ONLY = re.compile(r"^TP\d+$")


@dataclass(frozen=True)
class Topology:
    """The deployment as the server's arguments describe it (None: not known)."""

    tp_size: int | None = None
    nnodes: int = 1
    node_rank: int = 0
    base_gpu_id: int = 0

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> Topology:
        """From ``server_args`` fields or command-line flags (strings)."""
        return cls(
            tp_size=_int(fields.get("tp_size")),
            nnodes=_int(fields.get("nnodes")) or 1,
            node_rank=_int(fields.get("node_rank")) or 0,
            base_gpu_id=_int(fields.get("base_gpu_id")) or 0,
        )

    @property
    def per_node(self) -> int | None:
        if self.tp_size is None or self.nnodes < 1 or self.tp_size % self.nnodes:
            return None
        return self.tp_size // self.nnodes

    def local_ranks(self) -> list[str]:
        """The TP ranks this node runs, when the deployment's size is known."""
        per_node = self.per_node
        if per_node is None:
            return []
        first = self.node_rank * per_node
        return [f"TP{r}" for r in range(first, first + per_node)]

    def other_node_ranks(self) -> list[str]:
        """The TP ranks the other nodes run."""
        if self.tp_size is None or self.nnodes <= 1:
            return []
        local = set(self.local_ranks())
        return [f"TP{r}" for r in range(self.tp_size) if f"TP{r}" not in local]

    def rank_of_device(self, device: int) -> str:
        per_node = self.per_node or 0
        return f"TP{self.node_rank * per_node + device - self.base_gpu_id}"


_ARGV_KEYS = {
    "tp_size": ("--tp-size", "--tp", "--tensor-parallel-size"),
    "nnodes": ("--nnodes",),
    "node_rank": ("--node-rank",),
    "base_gpu_id": ("--base-gpu-id",),
}


def topology_fields_from_argv(values: Mapping[str, str]) -> dict[str, str]:
    """``server_args``-style fields from a command line's flag values."""
    found = {}
    for key, flags in _ARGV_KEYS.items():
        value = next((values[f] for f in flags if f in values), None)
        if value is not None:
            found[key] = value
    return found


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "None", "") else None
    except ValueError:
        return None


class RankProgress:
    """The furthest step each rank's log reached."""

    def __init__(self) -> None:
        self.steps: dict[str, Step] = {}
        self._device_rank: dict[int, str] = {}

    def note(self, ranks: str, step: Step) -> None:
        """A line tagged ``ranks`` showed ``step``."""
        if ranks:
            self.steps[ranks] = later_step(self.steps.get(ranks), step)

    def note_device(self, device: int, step: Step, message: str, topology: Topology) -> None:
        """An NCCL line of CUDA device ``device`` showed ``step``."""
        m = _COMM_INIT.search(message)
        if m is not None and int(m[3]) == device:
            self._device_rank[device] = f"TP{m[1]}"
        rank = self._device_rank.get(device) or topology.rank_of_device(device)
        if device in self._device_rank or rank in self.steps:
            self.note(rank, step)
        # Otherwise the device's rank is unknown (another node's numbering, DP/EP tags):
        # better no rank than a made-up one.

    def _gaps(self) -> list[str]:
        """With the deployment unknown: the TP ranks missing between the lowest and the
        highest seen (a node runs consecutive ranks; TP0, TP1, TP3 means TP2 is silent)."""
        numbers = sorted(int(r[2:]) for r in self.steps)
        if len(numbers) < 2:
            return []
        return [f"TP{n}" for n in range(numbers[0], numbers[-1] + 1) if f"TP{n}" not in self.steps]

    def phases(self) -> dict[str, Phase]:
        """Each rank's phase."""
        return {rank: STEP_PHASE[step] for rank, step in self.steps.items()}

    def behind(self, topology: Topology) -> dict[str, Step | None]:
        """Ranks behind the furthest one, when at most half of them are (None: never seen)."""
        known: dict[str, Step | None] = dict(self.steps)
        if all(_TP_ONLY.match(r) for r in known):
            local = topology.local_ranks()
            expected = local if set(known) <= set(local) else self._gaps()
            for rank in expected:
                known.setdefault(rank, None)
        if len(known) < 2:
            return {}
        order = {rank: (step_rank(s) if s is not None else -1) for rank, s in known.items()}
        furthest = max(order.values())
        behind = {r: known[r] for r, o in order.items() if o < furthest}
        ahead = len(known) - len(behind)
        return behind if 0 < len(behind) <= ahead else {}


def rank_sort_key(rank: str) -> tuple[int, ...]:
    """``TP2`` before ``TP10``; ``DP0 TP3`` by its numbers."""
    return tuple(int(n) for n in re.findall(r"\d+", rank)) or (0,)

"""The server's lifecycle state, shared by routes, warm-up and shutdown."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from eagle_tui.core.sim.request import SimRequest


@dataclass
class ServerState:
    """Where the server is in its life, and what is in flight.

    ``in_flight`` plays the tokenizer manager's ``rid_to_state``: every request
    from validation until its response is finished, keyed by rid. It backs the
    duplicate-rid check and the drain count after SIGTERM.
    """

    phase: str = "launching"
    ready: bool = False  # warm-up succeeded: /health answers 200
    gracefully_exit: bool = False  # SIGTERM received: /health answers 503
    crashed: bool = False  # a scheduler crash is under way
    served: int = 0  # /generate responses completed after ready
    in_flight: dict[str, SimRequest] = field(default_factory=dict)
    started_at: float = field(default_factory=time.time)
    phase_seconds: dict[str, float] = field(default_factory=dict)

    def enter(self, phase: str) -> None:
        """Move to ``phase``."""
        self.phase = phase

    def mark_ready(self) -> None:
        """Warm-up done: the server reports healthy from now on."""
        self.ready = True
        self.phase = "ready"

    @property
    def reported_phase(self) -> str:
        """The phase ``/sim/state`` reports (``stopping`` while draining)."""
        if self.crashed:
            return "crashed"
        return "stopping" if self.gracefully_exit else self.phase

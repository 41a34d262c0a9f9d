"""Everything the simulated server is told on its command line, as one frozen value.

The start-up phases and their durations live here too, because ``--time-scale``
and ``--slow-phase`` are defined in terms of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

PHASES: Final = ("launching", "loading_weights", "allocating_kv", "capturing_graphs", "warming_up")
"""Start-up phases in order, named as the health watcher names them."""

PHASE_SECONDS: Final[Mapping[str, float]] = {
    "launching": 2.0,  # imports, server_args, process spawn, distributed init
    "loading_weights": 8.0,  # the shard progress bar
    "allocating_kv": 1.5,
    "capturing_graphs": 5.0,  # the batch-size progress bar
    "warming_up": 1.5,  # port open, /health 503, until the warm-up request returns
}
"""Duration of each phase at ``--time-scale 1`` (about 20 s in all)."""

FATAL_KINDS: Final = ("oom", "nccl", "address-in-use", "rank-died")

LOG_DIALECTS: Final = ("0.5", "0.4")
"""SGLang versions whose log lines ``--log-dialect`` can print; the first is the default."""

DEFAULT_CONTEXT_LENGTH: Final = 131072


RANK_HANGS: Final = ("fifo", "stop", "peers")
"""``--rank-hang``: how a rank process hangs (``lifecycle.hangs``)."""


@dataclass(frozen=True)
class FaultRates:
    """Fractions of ``/generate`` requests that fail on purpose (each in [0, 1])."""

    error_rate: float = 0.0
    reset_rate: float = 0.0
    garbage_rate: float = 0.0


SPEC_ALGORITHMS: Final = ("EAGLE", "EAGLE3", "NGRAM")
"""The speculative algorithms ``--speculative-algorithm`` accepts (the ones drafters use)."""

DEFAULT_DECODE_LOG_INTERVAL: Final = 40


@dataclass(frozen=True)
class SpecSettings:
    """Speculative decoding as SGLang's ``--speculative-*`` flags set it, plus the sim's
    drafter quality: ``draft_acceptance`` is the chance the first draft of a verify step is
    accepted (later positions decay; docs/sim.md). ``algorithm`` None: speculation off."""

    algorithm: str | None = None
    num_steps: int = 3
    eagle_topk: int = 1
    num_draft_tokens: int = 4
    draft_model_path: str | None = None
    draft_acceptance: float = 0.75

    @property
    def enabled(self) -> bool:
        """True when a speculative algorithm is on."""
        return self.algorithm is not None

    @property
    def drafts_per_step(self) -> int:
        """Drafts verified per step (draft tokens minus the bonus slot)."""
        return max(self.num_draft_tokens - 1, 0)


@dataclass(frozen=True)
class SimConfig:
    """The resolved command line of ``python -m eagle_tui.core.sim``."""

    model_dir: Path
    model_path: str  # as the user spelled it: SGLang reports the path it was given
    host: str = "127.0.0.1"
    port: int = 30000
    log_file: Path | None = None
    context_length: int | None = None  # None: the model's own (config.json)
    time_scale: float = 1.0
    slow_phases: Mapping[str, float] = field(default_factory=dict)
    tokens_per_s: float = 60.0
    ttft: float = 0.15
    capacity: int = 32
    max_running_requests: int = 256
    incremental_streaming_output: bool = False
    api_key: str | None = None
    enable_metrics: bool = False
    tp_size: int = 8
    served_model_name: str | None = None
    health_latency: float = 0.05
    crash_at: str | None = None
    crash_after_requests: int | None = None
    stall_at: str | None = None
    fatal: str | None = None
    faults: FaultRates = FaultRates()
    fault_seed: int | None = None
    log_dialect: str = LOG_DIALECTS[0]
    rank_hang: str | None = None
    jit_compile_s: float | None = None
    leave_orphan_s: float | None = None
    dist_init_addr: str | None = None
    nnodes: int = 1
    node_rank: int = 0
    spec: SpecSettings = SpecSettings()
    decode_log_interval: int = DEFAULT_DECODE_LOG_INTERVAL

    def phase_seconds(self, phase: str) -> float:
        """How long ``phase`` takes in this run: base x time scale x its slow factor."""
        return PHASE_SECONDS[phase] * self.time_scale * self.slow_phases.get(phase, 1.0)

    def scaled(self, seconds: float) -> float:
        """A real-time SGLang interval (e.g. its 5 s drain poll) under ``--time-scale``."""
        return seconds * self.time_scale

    @property
    def url(self) -> str:
        """The base URL the server listens on."""
        return f"http://{self.host}:{self.port}"

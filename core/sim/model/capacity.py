"""Sizes a real deployment would derive from GPU memory: KV pool, limits, graph batch sizes."""

from __future__ import annotations

from dataclasses import dataclass

from eagle_tui.core.sim.config import SimConfig
from eagle_tui.core.sim.model.modeldir import ModelDir

CHUNKED_PREFILL_SIZE = 8192
MAX_PREFILL_TOKENS = 16384

# GPU memory per rank, in GB, as the start-up log and /server_info report it (an H200).
AVAIL_BEFORE_WEIGHTS = 139.12  # before anything is loaded
WEIGHT_GB = 72.87
KV_GB = 61.25
GRAPH_GB = 1.21


@dataclass(frozen=True)
class Capacity:
    """The scheduler's limits as SGLang logs and reports them."""

    context_len: int
    max_total_num_tokens: int
    max_req_input_len: int
    max_running_requests: int
    capture_bs: tuple[int, ...]


def capacity_for(config: SimConfig, model_dir: ModelDir) -> Capacity:
    """The limits for this run (context from the flag, else the model's config)."""
    context_len = config.context_length or model_dir.context_length
    total = max(4 * context_len, 524288)
    # SGLang: max_req_len = min(context_len - 1, total - 1); max_req_input_len = that - 5
    max_req_input_len = min(context_len - 1, total - 1) - 5
    graph_max_bs = min(256, config.max_running_requests)
    capture_bs = tuple(bs for bs in (1, 2, 4, 8, 12, *range(16, 257, 8)) if bs <= graph_max_bs)
    return Capacity(context_len, total, max_req_input_len, config.max_running_requests,
                    capture_bs)

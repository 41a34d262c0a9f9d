"""The start-up sequence up to the moment uvicorn binds the port.

Each phase prints SGLang 0.5.23's lines (per rank where SGLang prints per rank)
and takes its configured time; the weight-loading and CUDA-graph phases draw
``\\r``-updated tqdm bars from rank 0. Nothing listens on the port meanwhile:
clients get connection refused, exactly as with SGLang. Start-up faults fire
at their trigger point inside their phase (see ``startup_faults``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Final

from eagle_tui.core.sim.config import SimConfig
from eagle_tui.core.sim.engine.capacity import (
    AVAIL_BEFORE_WEIGHTS,
    CHUNKED_PREFILL_SIZE,
    GRAPH_GB,
    KV_GB,
    MAX_PREFILL_TOKENS,
    WEIGHT_GB,
    Capacity,
)
from eagle_tui.core.sim.lifecycle import startup_faults
from eagle_tui.core.sim.lifecycle.state import ServerState
from eagle_tui.core.sim.log.progress import shard_bar, tqdm_bar
from eagle_tui.core.sim.log.sink import SimLog
from eagle_tui.core.sim.model.modeldir import ModelDir
from eagle_tui.core.sim.server_info import server_args

SHARDS: Final = 64


class Startup:
    """Runs the phases before the HTTP server exists."""

    def __init__(self, config: SimConfig, log: SimLog, model_dir: ModelDir, capacity: Capacity,
                 state: ServerState) -> None:
        self._config = config
        self._log = log
        self._model_dir = model_dir
        self._capacity = capacity
        self._state = state

    async def until_bind(self) -> None:
        """Launch, load weights, allocate the KV cache and capture CUDA graphs."""
        await self._phase("launching", self._launching)
        await self._phase("loading_weights", self._loading_weights)
        await self._phase("allocating_kv", self._allocating_kv)
        await self._phase("capturing_graphs", self._capturing_graphs)
        self._log_engine_timings()

    async def _phase(self, name: str, body: Callable[[float], Awaitable[None]]) -> None:
        self._state.enter(name)
        started = time.monotonic()
        await body(self._config.phase_seconds(name))
        self._state.phase_seconds[name] = time.monotonic() - started

    async def _checkpoint(self, phase: str, progress: float) -> None:
        point = startup_faults.trigger_point(self._config, phase)
        if point is not None and progress >= point:
            await startup_faults.fire(self._config, self._log, phase)

    async def _launching(self, seconds: float) -> None:
        log = self._log
        log.main(f"server_args={server_args(self._config, self._capacity)!r}")
        await asyncio.sleep(seconds * 0.4)
        log.every_rank("Init parallel begin.")
        await self._checkpoint("launching", 0.5)
        await asyncio.sleep(seconds * 0.4)
        await self._checkpoint("launching", 1.0)
        log.every_rank(f"Init parallel ends. elapsed={seconds * 0.4:.2f} s")
        log.every_rank("Memory baseline taken. mem usage=0.00 GB")
        await asyncio.sleep(seconds * 0.2)

    async def _loading_weights(self, seconds: float) -> None:
        self._log.every_rank(f"Load weight begin. avail mem={AVAIL_BEFORE_WEIGHTS:.2f} GB")
        started = time.monotonic()
        desc = "Multi-thread loading shards"
        self._log.raw("\r" + shard_bar(desc, 0, SHARDS, 0.0))
        for shard in range(1, SHARDS + 1):
            await asyncio.sleep(seconds / SHARDS)
            await self._checkpoint("loading_weights", shard / SHARDS)
            self._log.raw("\r" + shard_bar(desc, shard, SHARDS, time.monotonic() - started))
        self._log.raw("\n")
        arch = (self._model_dir.architectures or ["DeepseekV3ForCausalLM"])[0]
        self._log.every_rank(
            f"Load weight end. elapsed={time.monotonic() - started:.2f} s, type={arch}, "
            f"avail mem={AVAIL_BEFORE_WEIGHTS - WEIGHT_GB:.2f} GB, mem usage={WEIGHT_GB:.2f} GB."
        )

    async def _allocating_kv(self, seconds: float) -> None:
        await asyncio.sleep(seconds * 0.5)
        await self._checkpoint("allocating_kv", 0.5)
        half = KV_GB / 2
        self._log.every_rank(
            f"KV Cache is allocated. dtype: torch.bfloat16, "
            f"#tokens: {self._capacity.max_total_num_tokens}, K size: {half:.2f} GB, "
            f"V size: {half:.2f} GB"
        )
        await asyncio.sleep(seconds * 0.5)
        self._log.every_rank(f"Memory pool end. avail mem={self._avail_after_kv():.2f} GB")

    async def _capturing_graphs(self, seconds: float) -> None:
        avail = self._avail_after_kv()
        self._log.every_rank(
            "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, "
            f"avail mem={avail:.2f} GB"
        )
        batch_sizes = list(reversed(self._capacity.capture_bs))
        started = time.monotonic()
        for done, bs in enumerate(batch_sizes):
            used = GRAPH_GB * done / len(batch_sizes)
            desc = f"Capturing batches (bs={bs} avail_mem={avail - used:.2f} GB)"
            self._log.raw("\r" + tqdm_bar(desc, done, len(batch_sizes), time.monotonic() - started))
            await asyncio.sleep(seconds / len(batch_sizes))
            await self._checkpoint("capturing_graphs", (done + 1) / len(batch_sizes))
        final_desc = f"Capturing batches (bs=1 avail_mem={avail - GRAPH_GB:.2f} GB)"
        total = len(batch_sizes)
        self._log.raw("\r" + tqdm_bar(final_desc, total, total, time.monotonic() - started) + "\n")
        self._log_graph_end(time.monotonic() - started, avail - GRAPH_GB)

    def _log_graph_end(self, elapsed: float, avail: float) -> None:
        sizes = ", ".join(str(bs) for bs in self._capacity.capture_bs)
        self._log.every_rank(
            f"Capture target decode CUDA graph end. bs=[{sizes}], elapsed={elapsed:.2f} s, "
            f"mem usage={GRAPH_GB:.2f} GB, avail mem={avail:.2f} GB."
        )
        cap = self._capacity
        self._log.rank(0, (
            f"max_total_num_tokens={cap.max_total_num_tokens}, "
            f"chunked_prefill_size={CHUNKED_PREFILL_SIZE}, "
            f"max_prefill_tokens={MAX_PREFILL_TOKENS}, "
            f"max_running_requests={cap.max_running_requests}, context_len={cap.context_len}, "
            f"available_gpu_mem={avail:.2f} GB"
        ))

    def _log_engine_timings(self) -> None:
        seconds = self._state.phase_seconds
        self._log.main(
            "Engine startup timings (s): "
            f"load_weight={seconds.get('loading_weights', 0.0):.2f}, "
            f"kv_cache_allocation={seconds.get('allocating_kv', 0.0):.2f}, "
            f"scheduler_e2e={sum(seconds.values()):.2f}, cuda_graph={{prefill=0.00, "
            f"decode={seconds.get('capturing_graphs', 0.0):.2f}, target_verify=0.00, "
            "draft_prefill=0.00, draft_decode=0.00, draft_extend=0.00}"
        )

    @staticmethod
    def _avail_after_kv() -> float:
        return AVAIL_BEFORE_WEIGHTS - WEIGHT_GB - KV_GB

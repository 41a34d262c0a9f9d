"""The start-up sequence up to the moment uvicorn binds the port.

Each phase prints SGLang's lines in the log's dialect (per rank where SGLang
prints per rank) and takes its configured time; the weight-loading and CUDA-graph
phases draw ``\\r``-updated tqdm bars from rank 0. Nothing listens on the port meanwhile:
clients get connection refused, exactly as with SGLang. Start-up faults fire
at their trigger point inside their phase (see ``startup_faults``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Final

from eagle_tui.core.sim.config import SimConfig
from eagle_tui.core.sim.engine.state import ServerState
from eagle_tui.core.sim.lifecycle import hangs, startup_faults
from eagle_tui.core.sim.log.progress import shard_bar
from eagle_tui.core.sim.log.sink import SimLog
from eagle_tui.core.sim.model.capacity import (
    AVAIL_BEFORE_WEIGHTS,
    CHUNKED_PREFILL_SIZE,
    GRAPH_GB,
    KV_GB,
    MAX_PREFILL_TOKENS,
    WEIGHT_GB,
    Capacity,
)
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
        if self._config.leave_orphan_s is not None:
            pid = hangs.leave_orphan(self._config.port, self._config.leave_orphan_s)
            self._log.main(f"[sim] started a child that will outlive this server: PID {pid}")
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
        recorded = log.dialect.recorded_server_args()
        log.main(log.dialect.server_args_line(server_args(self._config, self._capacity, recorded)))
        begin, end = log.dialect.init_lines(seconds * 0.4)
        await asyncio.sleep(seconds * 0.4)
        for line in begin:
            log.every_rank(line)
        if self._config.rank_hang == "peers" and self._config.dist_init_addr:
            world = self._config.tp_size
            await hangs.store_rank(self._config.dist_init_addr, world)
        await self._checkpoint("launching", 0.5)
        await asyncio.sleep(seconds * 0.4)
        await self._checkpoint("launching", 1.0)
        for line in end:
            log.every_rank(line)
        await asyncio.sleep(seconds * 0.2)

    async def _loading_weights(self, seconds: float) -> None:
        dialect = self._log.dialect
        self._log.every_rank(dialect.weight_begin(AVAIL_BEFORE_WEIGHTS))
        if self._config.rank_hang == "fifo":
            await hangs.fifo_rank()
        if self._config.rank_hang == "stop":
            await hangs.stopped_rank()
        started = time.monotonic()
        desc = dialect.shard_desc
        self._log.raw("\r" + shard_bar(desc, 0, SHARDS, 0.0))
        for shard in range(1, SHARDS + 1):
            await asyncio.sleep(seconds / SHARDS)
            await self._checkpoint("loading_weights", shard / SHARDS)
            self._log.raw("\r" + shard_bar(desc, shard, SHARDS, time.monotonic() - started))
        self._log.raw("\n")
        arch = (self._model_dir.architectures or ["DeepseekV3ForCausalLM"])[0]
        self._log.every_rank(dialect.weight_end(time.monotonic() - started, arch,
                                                AVAIL_BEFORE_WEIGHTS - WEIGHT_GB, WEIGHT_GB))

    async def _allocating_kv(self, seconds: float) -> None:
        await asyncio.sleep(seconds * 0.5)
        await self._checkpoint("allocating_kv", 0.5)
        dialect = self._log.dialect
        half = KV_GB / 2
        self._log.every_rank(dialect.kv_allocated(self._capacity.max_total_num_tokens, half, half))
        await asyncio.sleep(seconds * 0.5)
        self._log.every_rank(dialect.pool_end(self._avail_after_kv()))

    async def _capturing_graphs(self, seconds: float) -> None:
        dialect = self._log.dialect
        avail = self._avail_after_kv()
        self._log.every_rank(dialect.graph_begin(avail))
        if self._config.jit_compile_s is not None:
            await hangs.compile_rank(self._config.jit_compile_s)
        batch_sizes = list(reversed(self._capacity.capture_bs))  # captured largest first
        total = len(batch_sizes)
        started = time.monotonic()
        for done, bs in enumerate(batch_sizes):
            left = avail - GRAPH_GB * done / total
            bar = dialect.graph_bar(bs, left, done, total, time.monotonic() - started)
            self._log.raw("\r" + bar)
            await asyncio.sleep(seconds / total)
            await self._checkpoint("capturing_graphs", (done + 1) / total)
        bar = dialect.graph_bar(1, avail - GRAPH_GB, total, total, time.monotonic() - started)
        self._log.raw("\r" + bar + "\n")
        self._log_graph_end(time.monotonic() - started, avail - GRAPH_GB)

    def _log_graph_end(self, elapsed: float, avail: float) -> None:
        dialect = self._log.dialect
        self._log.every_rank(dialect.graph_end(self._capacity.capture_bs, elapsed, GRAPH_GB, avail))
        self._log.rank(0, dialect.scheduler_limits(self._capacity, CHUNKED_PREFILL_SIZE,
                                                   MAX_PREFILL_TOKENS, avail))

    def _log_engine_timings(self) -> None:
        line = self._log.dialect.engine_timings(self._state.phase_seconds)
        if line is not None:
            self._log.main(line)

    @staticmethod
    def _avail_after_kv() -> float:
        return AVAIL_BEFORE_WEIGHTS - WEIGHT_GB - KV_GB

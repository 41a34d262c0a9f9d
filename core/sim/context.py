"""Everything a route handler needs, in one object hung on the Starlette app."""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, cast

from starlette.requests import Request

from eagle_tui.core.sim.config import SimConfig
from eagle_tui.core.sim.engine.faults import FaultInjector
from eagle_tui.core.sim.engine.prefix_cache import PrefixCache
from eagle_tui.core.sim.engine.scheduler import Scheduler
from eagle_tui.core.sim.engine.state import ServerState
from eagle_tui.core.sim.engine.stats import Stats
from eagle_tui.core.sim.log import tracebacks
from eagle_tui.core.sim.log.death import scheduler_crash
from eagle_tui.core.sim.log.sink import SimLog
from eagle_tui.core.sim.model.capacity import Capacity
from eagle_tui.core.sim.model.fake_model import FakeModel
from eagle_tui.core.sim.model.modeldir import ModelDir
from eagle_tui.core.sim.request import SimRequest


@dataclass
class SimContext:
    """The running server: config, model, scheduler, state, faults."""

    config: SimConfig
    log: SimLog
    model_dir: ModelDir
    capacity: Capacity
    state: ServerState
    stats: Stats
    cache: PrefixCache
    faults: FaultInjector
    scheduler: Scheduler = field(init=False)
    background: set[asyncio.Task[None]] = field(default_factory=set)

    def __post_init__(self) -> None:
        config = self.config
        self.scheduler = Scheduler(
            model_dir=self.model_dir, model=FakeModel(self.model_dir), log=self.log,
            stats=self.stats, cache=self.cache, tokens_per_s=config.tokens_per_s,
            ttft=config.ttft, capacity=config.capacity,
            max_running=config.max_running_requests,
            max_total_tokens=self.capacity.max_total_num_tokens,
            max_req_input_len=self.capacity.max_req_input_len,
            on_out_of_vocab=self._out_of_vocab,
            spec=config.spec, decode_log_interval=config.decode_log_interval,
        )

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        """Run ``coroutine`` in the background, keeping a reference until it ends."""
        task = asyncio.create_task(coroutine)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def crash(self, traceback_text: str, *, pause: float | None = None) -> None:
        """A scheduler crash: stop serving, log it like SGLang, then kill the process.

        ``pause`` defaults to the dialect's crash-diagnostics wait, time-scaled.
        """
        if self.state.crashed:
            return
        self.state.crashed = True
        self.scheduler.halt()
        sglang_pause = self.log.dialect.runtime_crash().pause
        wait = self.config.scaled(sglang_pause) if pause is None else pause
        self.spawn(scheduler_crash(self.log, traceback_text, wait))

    async def run_scheduler(self) -> None:
        """The scheduler loop; a bug in it crashes the server loudly instead of hanging it."""
        try:
            await self.scheduler.run()
        except Exception:
            self.crash(traceback.format_exc().rstrip("\n"))

    def crash_on_gpu_fault(self, *, pause: float | None = None) -> None:
        """The crash ``--crash-after-requests`` and ``/sim/crash`` cause."""
        self.crash(tracebacks.illegal_memory_access(), pause=pause)

    def _out_of_vocab(self, request: SimRequest) -> None:
        self.crash(tracebacks.out_of_vocab())


def sim_context(request: Request) -> SimContext:
    """The SimContext of the app serving ``request``."""
    return cast(SimContext, request.app.state.sim)

"""Running the simulated server: start-up phases, then uvicorn until the process ends."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
from collections.abc import Iterator
from typing import TextIO

import uvicorn

from eagle_tui.core.errors import ConfigError
from eagle_tui.core.sim.config import SimConfig
from eagle_tui.core.sim.context import SimContext
from eagle_tui.core.sim.engine.faults import FaultInjector
from eagle_tui.core.sim.engine.prefix_cache import PrefixCache
from eagle_tui.core.sim.engine.state import ServerState
from eagle_tui.core.sim.engine.stats import Stats
from eagle_tui.core.sim.http.app import build_app
from eagle_tui.core.sim.lifecycle.shutdown import die_by_signal, install_signal_handlers
from eagle_tui.core.sim.lifecycle.startup import Startup
from eagle_tui.core.sim.log.dialect import dialect_named
from eagle_tui.core.sim.log.sink import SimLog
from eagle_tui.core.sim.log.uvicorn_lines import route_uvicorn_logs
from eagle_tui.core.sim.model.capacity import Capacity, capacity_for
from eagle_tui.core.sim.model.modeldir import ModelDir, load_model_dir


def serve(config: SimConfig) -> int:
    """Run the server described by ``config``; the exit code when it ends by itself."""
    try:
        model_dir = load_model_dir(config.model_dir)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    with _log_stream(config) as stream:
        log = SimLog(stream, config.tp_size, dialect_named(config.log_dialect))
        return asyncio.run(_serve(config, log, model_dir))


@contextlib.contextmanager
def _log_stream(config: SimConfig) -> Iterator[TextIO]:
    if config.log_file is None:
        yield sys.stdout
        return
    with open(config.log_file, "a", encoding="utf-8") as stream:
        yield stream


async def _serve(config: SimConfig, log: SimLog, model_dir: ModelDir) -> int:
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, die_by_signal, signal.SIGINT)
    state = ServerState()
    capacity = capacity_for(config, model_dir)
    await Startup(config, log, model_dir, capacity, state).until_bind()
    ctx = SimContext(config=config, log=log, model_dir=model_dir, capacity=capacity,
                     state=state, stats=Stats(), cache=PrefixCache(),
                     faults=FaultInjector(config.faults, config.fault_seed,
                                          config.crash_after_requests))
    return await _run_http(ctx, capacity)


async def _run_http(ctx: SimContext, capacity: Capacity) -> int:
    config = ctx.config
    server = _QuietSignalsServer(uvicorn.Config(
        build_app(ctx), host=config.host, port=config.port, http="h11", ws="none",
        lifespan="on", log_config=None, access_log=True, timeout_keep_alive=5,
    ))
    route_uvicorn_logs(ctx.log)
    install_signal_handlers(ctx)
    with _port_taken(config) if config.fatal == "address-in-use" else contextlib.nullcontext():
        try:
            await server.serve()
        except SystemExit as e:  # uvicorn exits 1 when it cannot bind
            return e.code if isinstance(e.code, int) else 1
    return 0


@contextlib.contextmanager
def _port_taken(config: SimConfig) -> Iterator[None]:
    """Hold the port so uvicorn's own bind fails with its real ``[Errno 98]`` line."""
    blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    blocker.bind((config.host, config.port))
    blocker.listen()
    try:
        yield
    finally:
        blocker.close()


class _QuietSignalsServer(uvicorn.Server):
    """uvicorn without its signal handling: SGLang's SIGTERM drain is ours to do."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Leave signal handlers alone."""
        yield

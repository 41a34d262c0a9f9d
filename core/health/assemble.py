"""Build a ``Watcher`` from what the user gave: a URL, maybe a log, a PID, a launched server."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from eagle_tui.core.clock import Clock, SystemClock
from eagle_tui.core.health.history import StartupHistory
from eagle_tui.core.health.poller import HealthPoller
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.state import WatchState
from eagle_tui.core.health.timings import from_server_info
from eagle_tui.core.health.watcher import Watcher
from eagle_tui.core.proc.gpu import read_gpus
from eagle_tui.core.proc.launcher import ManagedServer
from eagle_tui.core.proc.orphans import OrphanReport, Watched, find_orphans
from eagle_tui.core.proc.probe import ProcessProbe
from eagle_tui.core.proc.report import GpuReport
from eagle_tui.core.proc.sampler import EvidenceSampler
from eagle_tui.core.serverlog.follower import LogFollower
from eagle_tui.core.sglang.client import SGLangClient
from eagle_tui.core.sglang.router import RouterProbe, WorkerAccess
from eagle_tui.core.sglang.types import HealthResult
from eagle_tui.core.urls import ServerURL

_LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0", "::"}


@dataclass(frozen=True)
class WatchOptions:
    """What to watch and how. ``process_access=False`` forces URL-only mode; ``evidence``
    samples the server's process tree every tick (``core.proc.sampler``)."""

    url: ServerURL
    log_path: Path | None = None
    pid: int | None = None
    settings: WatchSettings = field(default_factory=WatchSettings)
    history_path: Path | None = None
    use_history: bool = True
    signature: str | None = None
    process_access: bool = True
    gpu: bool = True
    api_key: str | None = None
    workers: WorkerAccess = field(default_factory=WorkerAccess)  # a router's, asked directly
    evidence: bool = True


def is_local(url: ServerURL) -> bool:
    """True when ``url`` points at this machine, so its port can be probed."""
    host = url.host
    if host in _LOOPBACK:
        return True
    try:
        return host in (socket.gethostname(), socket.getfqdn())
    except OSError:
        return False


def build_watcher(
    options: WatchOptions,
    *,
    clock: Clock | None = None,
    managed: ManagedServer | None = None,
    launched_at: float | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Watcher:
    """A watcher over every source the options allow; ``managed`` is a server we started."""
    clock = clock or SystemClock()
    settings = options.settings
    client = SGLangClient(options.url, api_key=options.api_key, transport=transport)
    # A router's own /health is 200 with no worker; ready means a worker can serve.
    router = RouterProbe(client, api_key=options.api_key, access=options.workers)

    async def check(timeout: float) -> HealthResult:
        return await router.health(timeout=timeout)

    async def close() -> None:
        await router.aclose()
        await client.aclose()

    poller = HealthPoller(
        check, clock=clock, interval_s=settings.poll_interval_s, timeout_s=settings.health_timeout_s
    )
    probe = _probe(options, managed)
    log = None
    if options.log_path is not None:
        log = LogFollower(options.log_path, from_start=managed is not None)
    history = None
    if options.use_history:
        history = StartupHistory(options.history_path)
    state = WatchState(
        settings,
        has_log=log is not None,
        has_process=probe is not None,
        history=history,
        signature=options.signature,
        launched_at=launched_at,
        date_backlog=managed is None,
    )
    return Watcher(
        state,
        clock=clock,
        log=log,
        probe=probe,
        poller=poller,
        gpu_reader=read_gpus if options.gpu and probe is not None else None,
        on_close=close,
        sampler_factory=_sampler_factory(options) if probe and options.evidence else None,
        timings_fetcher=lambda: _server_timings(client),
        orphan_finder=_find_orphans if probe is not None else None,
    )


def _find_orphans(watched: Watched, gpu: GpuReport | None) -> OrphanReport:
    return find_orphans(watched, gpu=gpu)


async def _server_timings(client: SGLangClient) -> dict[str, float]:
    return from_server_info((await client.server_info()).raw)


def _sampler_factory(options: WatchOptions) -> Callable[[int], EvidenceSampler]:
    gpu = read_gpus if options.gpu else None

    def make(pid: int) -> EvidenceSampler:
        return EvidenceSampler(pid, gpu=gpu)

    return make


def _probe(options: WatchOptions, managed: ManagedServer | None) -> ProcessProbe | None:
    if not options.process_access:
        return None
    local = is_local(options.url)
    port = options.url.effective_port if local else None
    if managed is not None:
        return ProcessProbe(managed.pid, port=port, exit_code=managed.exit_code)
    if options.pid is not None:
        return ProcessProbe(options.pid, port=port)
    if local:
        return ProcessProbe(port=port, discover=True)
    return None

"""One watched server: the core ``Watcher`` and a log follower, in their own thread.

The watcher's sources (log reads, psutil probes, the port table, NVML) are blocking calls,
so a ``ServerFeed`` runs them on a private event loop in a worker thread and hands the UI
only immutable results through ``emit``: a ``HealthSnapshot`` once per poll interval and
a ``LogBatch`` (every new log line since the last one, read at most ``LOG_HZ`` times a
second). Nothing here raises into the UI: failures become problems in the snapshot or
errors in the batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from eagle_tui.core.clock import Clock, SystemClock
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.tui.options import ServerTarget
from eagle_tui.tui.render.accept import AcceptanceReading

if TYPE_CHECKING:  # the watcher's modules pull in httpx and psutil: imported when run
    from eagle_tui.core.health.acceptance import AcceptanceTracker
    from eagle_tui.core.health.snapshot import HealthSnapshot
    from eagle_tui.core.health.watcher import Watcher
    from eagle_tui.core.proc.discover import ServerProcess
    from eagle_tui.core.proc.launcher import ManagedServer
    from eagle_tui.core.sglang.router import RouterProbe, RouterView, WorkerAccess

log = logging.getLogger(__name__)

LOG_HZ = 4.0
STOP_CHECK_S = 0.1
DISCOVER_EVERY_S = 3.0


@dataclass(frozen=True)
class LogBatch:
    """New log lines since the last batch, the live unterminated line, and any read error."""

    lines: tuple[str, ...] = ()
    partial: str = ""
    notes: tuple[str, ...] = ()
    error: str | None = None


if TYPE_CHECKING:
    from typing import TypeAlias

    FeedItem: TypeAlias = HealthSnapshot | LogBatch | RouterView | AcceptanceReading
    """What a feed emits: a snapshot per poll (and a router's workers), a batch of log lines
    per read."""

Emit = Callable[["HealthSnapshot | LogBatch | RouterView | AcceptanceReading"], None]
ACCEPT_EVERY_S = 5.0  # seconds between two looks at a server's acceptance and load
IDLE_LOOK_EVERY_S = 60.0  # …while its gauges say idle and its log shows nothing new
ServerAction = Literal["restart", "stop"]


class ServerFeed:
    """Watches one ``ServerTarget``; ``run`` blocks (call it from a thread worker).

    ``run`` keeps an event loop of its own in that thread: reading the log, probing the
    process tree and taking stacks block, so they must not run on the UI's loop, and the
    ``/health`` poll, the side looks and a restart share that loop (``request`` hands an
    action over to it)."""

    def __init__(
        self,
        target: ServerTarget,
        *,
        settings: WatchSettings | None = None,
        managed: ManagedServer | None = None,
        clock_factory: Callable[[], Clock] = SystemClock,
        use_history: bool = True,
        trust_workers: bool = False,
        accept_every_s: float = ACCEPT_EVERY_S,
    ) -> None:
        self.target = target
        self.trust_workers = trust_workers  # a router's listed workers may be asked directly
        self.accept_every_s = accept_every_s
        self.settings = settings or WatchSettings()
        self.managed = managed
        self._clock_factory = clock_factory
        self._use_history = use_history
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watcher: Watcher | None = None
        self._last_snapshot: HealthSnapshot | None = None
        self._router: RouterProbe | None = None
        self._accept: AcceptanceTracker | None = None
        self.looked_at_acceptance = 0  # looks taken (a server without speculation too)
        self._next_accept = float("-inf")
        self._side_looks: dict[str, asyncio.Task[None]] = {}
        self._log_active = False  # the log showed a line since the last look (not our polls)
        self._run_seen: tuple[int, int | None] | None = None  # incarnation and PID

    @property
    def can_control(self) -> bool:
        """True when eagle-tui owns the server process (restart and stop apply)."""
        return self.managed is not None

    def run(self, stop: threading.Event, emit: Emit) -> None:
        """Watch until ``stop`` is set, emitting snapshots and log batches."""
        asyncio.run(self._main(stop, emit))

    def request(self, action: ServerAction) -> Future[str]:
        """Ask the feed's thread to restart or stop the managed server; the future's result
        says what happened (or holds the error)."""
        loop = self._loop
        if loop is None or self.managed is None:
            future: Future[str] = Future()
            future.set_exception(RuntimeError("this server is not managed by eagle-tui"))
            return future
        return asyncio.run_coroutine_threadsafe(self._control(action), loop)

    def request_stacks(self) -> Future[str]:
        """Ask the feed's thread to take every rank's Python stack now (py-spy); the future's
        result is the stacks in words (they show on the card with the next snapshot)."""
        loop = self._loop
        if loop is None:
            future: Future[str] = Future()
            future.set_exception(RuntimeError("this server is not being watched yet"))
            return future
        return asyncio.run_coroutine_threadsafe(self._take_stacks(), loop)

    async def _take_stacks(self) -> str:
        watcher = self._watcher
        if watcher is None or not watcher.request_stacks():
            raise RuntimeError("no process to look at (a remote server, or not found yet)")
        await watcher.wait_stacks()
        stacks = watcher.stacks
        return stacks.describe() if stacks is not None else "no stack"

    # -- the loop ----------------------------------------------------------------------------

    async def _main(self, stop: threading.Event, emit: Emit) -> None:
        self._loop = asyncio.get_running_loop()
        clock = self._clock_factory()
        self._watcher = self._build(clock, launched_at=None)
        tail = asyncio.create_task(self._tail_log(stop, emit, clock))
        try:
            await self._watch(stop, emit, clock)
        finally:
            for task in (tail, *self._side_looks.values()):
                task.cancel()
            await asyncio.gather(tail, *self._side_looks.values(), return_exceptions=True)
            await self._close_watcher()
            self._loop = None

    async def _watch(self, stop: threading.Event, emit: Emit, clock: Clock) -> None:
        next_tick = clock.monotonic()
        while not stop.is_set():
            if clock.monotonic() >= next_tick:
                next_tick = clock.monotonic() + self.settings.poll_interval_s
                await self._tick(emit)
            await clock.sleep(STOP_CHECK_S)

    async def _tick(self, emit: Emit) -> None:
        watcher = self._watcher
        if watcher is None:
            return
        try:
            snapshot = await watcher.tick()
        except Exception as exc:  # the watcher guards its sources; this is a last resort
            log.exception("watcher tick failed for %s", self.target.url.public)
            if self._last_snapshot is None:
                return
            snapshot = replace(self._last_snapshot, problems=(f"watch failed: {exc}",))
        snapshot = self._with_gauges(snapshot)
        self._last_snapshot = snapshot
        emit(snapshot)
        self._look_aside("router", lambda: self._router_tick(emit))
        self._look_aside("acceptance", lambda: self._acceptance_tick(emit))

    def _look_aside(self, name: str, look: Callable[[], Coroutine[None, None, None]]) -> None:
        """Start a side view's look unless its last one is still waiting: a server that
        takes connections and never answers (a port held by another process, a stopped
        scheduler) makes a look wait out its timeouts, and the snapshots must not wait
        with it (they did: one every 10-15 s)."""
        running = self._side_looks.get(name)
        if running is None or running.done():
            self._side_looks[name] = asyncio.create_task(look())

    def _with_gauges(self, snapshot: HealthSnapshot) -> HealthSnapshot:
        """The snapshot with the live ``/metrics`` load while the last scrape is fresh; a
        new process (a restart) makes the next look read ``/server_info`` again."""
        from eagle_tui.core.health.load import with_live_load

        process = snapshot.process
        run = (snapshot.incarnation, process.pid if process is not None else None)
        if self._accept is not None and self._run_seen not in (None, run):
            self._accept.forget_info()
        self._run_seen = run
        gauges = self._accept.load if self._accept is not None else None
        return with_live_load(snapshot, gauges, 2 * self.accept_every_s)

    def _look_due(self, now: float) -> bool:
        """A look is due every ``accept_every_s``; while the gauges say idle and the log
        shows nothing new, only every ``IDLE_LOOK_EVERY_S`` (each look is a line in the
        server's log)."""
        gauges = self._accept.load if self._accept is not None else None
        idle = gauges is not None and gauges.running == 0 and not gauges.queued
        if idle and not self._log_active and self.target.log_file is not None:
            return now >= self._next_accept - self.accept_every_s + IDLE_LOOK_EVERY_S
        return now >= self._next_accept

    async def _acceptance_tick(self, emit: Emit) -> None:
        """When due (``_look_due``): the live load and the acceptance of a speculating
        server (``/server_info`` only at the first look and after a restart)."""
        from eagle_tui.core.clock import SystemClock
        from eagle_tui.core.health.acceptance import TIMEOUTS, AcceptanceTracker
        from eagle_tui.core.health.load import SERVING
        from eagle_tui.core.sglang.client import SGLangClient

        latest = self._last_snapshot
        if latest is None or latest.phase not in SERVING:
            if self._accept is not None:  # read /server_info again once it serves
                self._accept.forget_info()
            return
        clock = SystemClock()
        if not self._look_due(clock.monotonic()):
            return
        self._next_accept = clock.monotonic() + self.accept_every_s
        self._log_active = False
        if self._accept is None:
            client = SGLangClient(self.target.url, timeouts=TIMEOUTS)
            self._accept = AcceptanceTracker(client, clock)
        try:
            live = await self._accept.sample()
        except Exception:  # a side view: never let it stop the watch
            log.exception("acceptance look failed for %s", self.target.url.public)
            return
        self.looked_at_acceptance += 1
        if live is not None and live.config.enabled:
            emit(AcceptanceReading(live, tuple(self._accept.history)))

    async def _router_tick(self, emit: Emit) -> None:
        """When the server is SGLang's router, its workers too (a ``RouterView``)."""
        from eagle_tui.core.sglang.router import RouterProbe

        if self._router is None:
            from eagle_tui.core.sglang.client import SGLangClient

            self._router = RouterProbe(SGLangClient(self.target.url),
                                       access=self._access())
        try:
            if await self._router.detect():
                emit(await self._router.look(with_load=True))
        except Exception:  # a side view: never let it stop the watch
            log.exception("router look failed for %s", self.target.url.public)

    async def _tail_log(self, stop: threading.Event, emit: Emit, clock: Clock) -> None:
        from eagle_tui.core.serverlog.follower import LogFollower
        from eagle_tui.core.serverlog.ourpolls import OUR_POLLS
        from eagle_tui.core.urls import redact

        if self.target.log_file is None:
            return
        follower = LogFollower(self.target.log_file, from_start=self.managed is not None)
        last_error: str | None = None
        try:
            while not stop.is_set():
                chunk = follower.read()
                if chunk.lines and self._accept is not None:
                    self._accept.add_log_lines(chunk.lines)
                self._log_active = self._log_active or any(
                    not OUR_POLLS.search(line) for line in chunk.lines)
                if chunk.lines or chunk.notes or chunk.error != last_error or chunk.partial:
                    # a log is another user's text: its credentials never reach the pane
                    # (redacted here, in the feed's thread, not in the UI thread's)
                    emit(LogBatch(tuple(redact(line) for line in chunk.lines),
                                  redact(chunk.partial), chunk.notes, chunk.error))
                last_error = chunk.error
                await clock.sleep(1.0 / LOG_HZ)
        finally:
            follower.close()

    # -- building and controlling -------------------------------------------------------------

    def _build(self, clock: Clock, launched_at: float | None) -> Watcher:
        from eagle_tui.core.health.assemble import WatchOptions, build_watcher

        options = WatchOptions(
            url=self.target.url,
            log_path=self.target.log_file,
            pid=self.target.pid,
            settings=self.settings,
            use_history=self._use_history,
            workers=self._access(),
        )
        return build_watcher(options, clock=clock, managed=self.managed, launched_at=launched_at)

    def _access(self) -> WorkerAccess:
        from eagle_tui.core.sglang.router import WorkerAccess

        return WorkerAccess(frozenset({self.target.url}), listed=self.trust_workers)

    async def _close_watcher(self) -> None:
        if self._accept is not None:
            with contextlib.suppress(Exception):
                await self._accept.aclose()
            self._accept = None
        if self._router is not None:
            with contextlib.suppress(Exception):
                await self._router.aclose()
                await self._router.client.aclose()
            self._router = None
        if self._watcher is not None:
            with contextlib.suppress(Exception):
                await self._watcher.aclose()
            self._watcher = None

    async def _control(self, action: ServerAction) -> str:
        assert self.managed is not None
        if action == "stop":
            if self._watcher is not None:
                self._watcher.state.request_stop()
            report = await self.managed.stop()
            return "; ".join(report.steps[-2:]) if report is not None else "not running"
        if self._watcher is None:
            raise RuntimeError("this server is not being watched yet")
        result = await self._watcher.restart_managed(self.managed)
        if not result.started:
            return f"not restarted: {result.reason}"
        return f"restarted as PID {result.pid}"


def user_name(uid: int | None) -> str:
    """The login name of ``uid`` (its number when the system has no name for it)."""
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name if uid is not None else "?"
    except KeyError:
        return str(uid)


def target_of(server: ServerProcess) -> ServerTarget:
    """The dashboard target of a server found in the process table."""
    assert server.url is not None
    owner = "" if server.mine else f" (user {user_name(server.uid)})"
    return ServerTarget(
        server.url,
        name=f"{server.kind} :{server.port}{owner}",
        log_file=server.log_path,
        pid=server.pid,
        quiet=not server.mine,
    )


class ServerDiscovery:
    """Servers on this host for a dashboard started with no ``--url``: each call to
    ``new_targets`` returns the ones not returned before (a restarted server is a new PID,
    so it comes back as a new target)."""

    def __init__(self, discover: Callable[[], list[ServerProcess]] | None = None) -> None:
        self._discover = discover
        self._seen: set[int] = set()

    def new_targets(self) -> list[ServerTarget]:
        """Targets of the servers found since the last call; never raises."""
        discover = self._discover
        if discover is None:
            from eagle_tui.core.proc.discover import discover_servers

            discover = discover_servers
        try:
            found = discover()
        except Exception:  # the process table can fail in many ways; try again next time
            log.exception("server discovery failed")
            return []
        new = [server for server in found if server.pid not in self._seen and server.url]
        self._seen.update(server.pid for server in new)
        return [target_of(server) for server in new]

"""The pool of SGLang servers a batch sends to: bounded in flight, least-loaded first.

Each server takes at most ``limit`` requests at once. ``acquire`` hands out the ready server
with the fewest requests in flight and waits (without polling) when all are full or paused.
A server is paused when a failure suggests it is down (or too many errors come in a row) and
re-admitted by the health monitor (``core.capture.healthloop``) once ``/health`` answers 200;
a server that refuses our credentials is taken out for the rest of the run.

A server that is paused again before any request succeeded on it backs off like any
transient error (:meth:`ServerPool.hold_for`): it is held out for a delay that doubles with
each such pause, however healthy ``/health`` says it is, and then re-admitted on probation,
one request in flight until one succeeds. A router whose workers are listed healthy but which
answers every request 503 ``no_available_workers`` passes every health check; without this
it was re-admitted at once and sent a full pool of requests each time (~73 a second).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from eagle_tui.core.clock import Clock
from eagle_tui.core.sglang import SGLangClient
from eagle_tui.core.sglang.types import HealthResult

log = logging.getLogger(__name__)

FIRST_CHECK = "waiting for the first health check"
"""Why a server of a pool started paused is not sent to yet (not an outage)."""


class Checks(Protocol):
    """What answers a server's health checks and takes its aborts: its client, or for
    SGLang's router the ``RoutedClient`` that asks the router's workers
    (``core.capture.routed``)."""

    async def health(self, *, generate: bool = False, timeout: float | None = None) -> (
        HealthResult
    ): ...

    async def abort(self, rid: str) -> None: ...


class ServerState(Enum):
    """Whether a server takes new requests."""

    READY = "ready"
    PAUSED = "paused"
    REFUSED = "refused"


class NoServerLeft(Exception):
    """Every server refused us (e.g. all want an API key we do not have)."""


class PoolClosed(Exception):
    """The pool was closed (the batch is stopping); no more requests go out."""


HOLD_BASE_S = 1.0
"""Hold of the second pause without a success in between (the first has none: a server that
restarted is re-admitted at its first healthy check); each further one doubles it."""
HOLD_MAX_S = 30.0
"""Longest hold: what the retry policy waits at most between a sample's attempts."""
PROBATION_AFTER = 2
"""Pauses without a success after which a re-admitted server takes one request at a time
until one succeeds."""


@dataclass(frozen=True)
class ServerStatus:
    """An immutable view of one server for progress snapshots."""

    url: str
    state: str
    reason: str
    in_flight: int
    limit: int
    sent: int
    succeeded: int
    failed: int


class Server:
    """One server of the pool and its live counters (mutated on the event loop only)."""

    def __init__(self, client: SGLangClient, limit: int, router: Checks | None = None) -> None:
        self.client = client  # sends the requests; asked for model and server info
        self.checks: Checks = router or client
        self.is_router = router is not None
        self.url = client.base_url  # the public form: for logs, rows and snapshots
        self.limit = limit
        self.state = ServerState.READY
        self.reason = ""
        self.in_flight = 0
        self.error_streak = 0
        self.sent = 0
        self.succeeded = 0
        self.failed = 0
        self.paused_at: float | None = None
        self.relapses = 0  # pauses for a failure since a request last succeeded here
        self.held_until = 0.0  # monotonic time before which it is not re-admitted
        self.probation = False  # re-admitted after relapses: one request until a success
        # Set when the server is paused, so its health monitor re-checks it at once.
        self.paused_signal = asyncio.Event()
        # The timeout and rid of each request in flight here, so a stop can abort them by
        # rid or end them at once.
        self.attempts: dict[asyncio.Timeout, str] = {}
        self.cut = False
        self.aborted: set[str] = set()
        """Rids a stop aborted here (``/abort_request``): their aborted answers are the
        user's doing, not the server failing."""

    @property
    def has_room(self) -> bool:
        """True while it takes one more request (one at a time on probation)."""
        return self.in_flight < (1 if self.probation else self.limit)

    def cut_in_flight(self) -> int:
        """End every request in flight here now (closing its connection); how many. A router
        has no ``/abort_request``, but it stops the worker's request when we hang up."""
        self.cut = True
        loop = asyncio.get_running_loop()
        for scope in self.attempts:
            if not scope.expired():  # an expired one is already on its way out
                scope.reschedule(loop.time())
        return len(self.attempts)

    def rids_in_flight(self) -> list[str]:
        """The rids of the requests in flight here."""
        return list(self.attempts.values())

    def status(self) -> ServerStatus:
        """A snapshot of this server."""
        return ServerStatus(
            self.url, self.state.value, self.reason, self.in_flight, self.limit,
            self.sent, self.succeeded, self.failed,
        )

    def __repr__(self) -> str:
        return f"Server({self.url!r}, {self.state.value}, {self.in_flight}/{self.limit})"


class ServerPool:
    """Least-in-flight choice over ready servers, with pausing and re-admission."""

    def __init__(
        self,
        servers: Sequence[Server],
        clock: Clock,
        *,
        error_streak_limit: int = 8,
        start_paused: bool = False,
    ) -> None:
        """``start_paused`` leaves every server out until its first passing health check."""
        if not servers:
            raise ValueError("a server pool needs at least one server")
        self.servers = tuple(servers)
        self._clock = clock
        self._error_streak_limit = error_streak_limit
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False
        self._down_since: float | None = None
        if start_paused:
            for server in self.servers:
                self.pause(server, FIRST_CHECK, failure=False)

    # -- taking and returning slots ---------------------------------------------------

    async def acquire(self, avoid: Server | None = None, prefer: str | None = None) -> Server:
        """A ready server with room, the least loaded one; waits while there is none.

        ``prefer`` (a server's public URL) is taken first when it is ready and has room: a
        conversation's next turn goes where its prefix is cached.

        ``avoid`` (the server a retry just failed on) is used only when no other server is
        ready: a server that resets connections may still pass its health checks.
        Raises PoolClosed once ``close`` was called and NoServerLeft when every server
        refused us.
        """
        while True:
            self._check_open()
            server = self._preferred(prefer, avoid) or self._least_loaded(avoid)
            if server is not None:
                server.in_flight += 1
                server.sent += 1
                return server
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake(1)  # we were woken and then cancelled: pass the wake on
                raise

    def give_back(self, server: Server) -> None:
        """Return ``server``'s slot for a request the batch's stop ended (cut or aborted on
        purpose): neither a success nor a failure of the server."""
        server.in_flight -= 1
        self._wake(1)

    def release(self, server: Server, *, ok: bool) -> None:
        """Return ``server``'s slot; ``ok`` says whether the request succeeded."""
        server.in_flight -= 1
        if ok:
            server.succeeded += 1
            server.error_streak = 0
            server.relapses = 0
            if server.probation:
                server.probation = False
                self._wake(server.limit)
        else:
            server.failed += 1
        self._wake(1)

    def _preferred(self, url: str | None, avoid: Server | None) -> Server | None:
        if url is None:
            return None
        for server in self.servers:
            if (server.url == url and server is not avoid
                    and server.state is ServerState.READY and server.has_room):
                return server
        return None

    def _least_loaded(self, avoid: Server | None) -> Server | None:
        ready = [s for s in self.servers if s.state is ServerState.READY]
        if avoid is not None and any(s is not avoid for s in ready):
            ready = [s for s in ready if s is not avoid]
        best: Server | None = None
        for server in ready:
            if server.has_room and (best is None or server.in_flight < best.in_flight):
                best = server
        return best

    def _check_open(self) -> None:
        if self._closed:
            raise PoolClosed("the server pool is closed")
        if all(s.state is ServerState.REFUSED for s in self.servers):
            reasons = "; ".join(f"{s.url}: {s.reason}" for s in self.servers)
            raise NoServerLeft(f"every server refused the capture ({reasons})")

    def _wake(self, count: int) -> None:
        while count > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                count -= 1

    def _wake_all(self) -> None:
        self._wake(len(self._waiters))

    # -- server states ---------------------------------------------------------------

    def note_error(self, server: Server) -> None:
        """Count a failed request; a long run of them pauses the server (circuit breaker)."""
        server.error_streak += 1
        if server.error_streak >= self._error_streak_limit:
            self.pause(server, f"{server.error_streak} failed requests in a row")

    def pause(self, server: Server, reason: str, *, failure: bool = True) -> None:
        """Stop sending to ``server`` until the health monitor re-admits it; a ``failure``
        paused again before any success holds it out longer (:meth:`hold_for`)."""
        if server.state is not ServerState.READY:
            return
        server.state = ServerState.PAUSED
        server.reason = reason
        if reason != FIRST_CHECK:  # the log says why before it says "healthy again"
            log.warning("server %s paused: %s", server.url, reason)
        server.paused_at = self._clock.monotonic()
        if failure:
            server.relapses += 1
            hold = self.hold_for(server.relapses)
            server.held_until = server.paused_at + hold
            if hold:
                server.reason = f"{reason}; backing off {hold:g} s (paused {server.relapses} " \
                    "times without a success)"
        server.paused_signal.set()
        self._update_down_since()

    @staticmethod
    def hold_for(relapses: int) -> float:
        """Seconds a server paused ``relapses`` times without a success in between is held
        out: none the first time, then 1, 2, 4 … up to :data:`HOLD_MAX_S`."""
        if relapses < 2:
            return 0.0
        return min(HOLD_MAX_S, HOLD_BASE_S * 2.0 ** min(relapses - 2, 32))

    def refuse(self, server: Server, reason: str) -> None:
        """Take ``server`` out for the rest of the run (it will not accept our requests)."""
        server.state = ServerState.REFUSED
        server.reason = reason
        self._update_down_since()
        self._wake_all()  # waiters must learn if no server is left

    def readmit(self, server: Server) -> bool:
        """Send to a paused ``server`` again (its health check passed), unless it is held
        out still; True when it was re-admitted. After :data:`PROBATION_AFTER` pauses
        without a success it takes one request until one succeeds."""
        if server.state is not ServerState.PAUSED:
            return False
        if self._clock.monotonic() < server.held_until:
            return False
        server.state = ServerState.READY
        server.reason = ""
        server.error_streak = 0
        server.paused_at = None
        server.probation = server.relapses >= PROBATION_AFTER
        self._update_down_since()
        self._wake(1 if server.probation else server.limit)
        return True

    def _update_down_since(self) -> None:
        if any(s.state is ServerState.READY for s in self.servers):
            self._down_since = None
        elif self._down_since is None:
            self._down_since = self._clock.monotonic()

    def down_for(self) -> float:
        """Seconds since no server was ready (0 while one is)."""
        if self._down_since is None:
            return 0.0
        return self._clock.monotonic() - self._down_since

    def close(self) -> None:
        """Refuse further ``acquire`` calls and wake everyone waiting in one."""
        self._closed = True
        self._wake_all()

    @property
    def in_flight(self) -> int:
        """Requests in flight over all servers."""
        return sum(s.in_flight for s in self.servers)

    def statuses(self) -> tuple[ServerStatus, ...]:
        """Snapshots of every server."""
        return tuple(s.status() for s in self.servers)

"""Health checks of the pool's servers during a batch: pause the failing, re-admit the healed.

A ready server is probed every ``interval_s``; ``failures_to_pause`` failed probes in a row
pause it (one slow ``/health`` on a loaded server is not an outage). A paused server is
probed every ``paused_interval_s`` and re-admitted at its first 200, unless the pool still
holds it out (a server paused again before any request succeeded on it backs off:
``core.capture.dispatch``). Refused servers (bad
credentials) are left alone: ``/health`` is exempt from auth, so it would lie about them.
"""

from __future__ import annotations

import asyncio
import logging

from eagle_tui.core.capture.dispatch import FIRST_CHECK, Server, ServerPool, ServerState
from eagle_tui.core.clock import Clock
from eagle_tui.core.errors import SGLangError

log = logging.getLogger(__name__)


class HealthMonitor:
    """Probes every server of ``pool`` on ``clock`` until cancelled."""

    def __init__(
        self,
        pool: ServerPool,
        clock: Clock,
        *,
        interval_s: float = 10.0,
        paused_interval_s: float = 1.0,
        timeout_s: float = 20.0,
        failures_to_pause: int = 2,
    ) -> None:
        self._pool = pool
        self._clock = clock
        self._interval_s = interval_s
        self._paused_interval_s = paused_interval_s
        self._timeout_s = timeout_s
        self._failures_to_pause = failures_to_pause
        self._failures: dict[str, int] = {}
        self.probes = 0

    async def run(self) -> None:
        """Probe all servers concurrently, forever (cancel to stop)."""
        async with asyncio.TaskGroup() as group:
            for server in self._pool.servers:
                group.create_task(self._watch(server))

    async def _watch(self, server: Server) -> None:
        while True:
            if server.state is not ServerState.REFUSED:
                await self.probe(server)
            if server.state is ServerState.PAUSED:
                await self._clock.sleep(self._paused_interval_s)
            else:
                await self._sleep_unless_paused(server)

    async def _sleep_unless_paused(self, server: Server) -> None:
        """Sleep ``interval_s``, cut short when dispatch pauses the server meanwhile."""
        server.paused_signal.clear()
        waits = [asyncio.ensure_future(self._clock.sleep(self._interval_s)),
                 asyncio.ensure_future(server.paused_signal.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    async def probe(self, server: Server) -> bool:
        """One health check of ``server``; updates its state; True when healthy."""
        self.probes += 1
        healthy, detail = await self._check(server)
        if healthy:
            self._failures[server.url] = 0
            if server.state is ServerState.PAUSED:
                self._admit(server)
            return True
        failures = self._failures.get(server.url, 0) + 1
        self._failures[server.url] = failures
        if server.state is ServerState.READY and failures >= self._failures_to_pause:
            self._pool.pause(server, f"{failures} health checks failed: {detail}")
        return False

    def _admit(self, server: Server) -> None:
        """Send to ``server`` again, or for the first time (a pool started paused), unless
        the pool holds it out still (it relapsed: backing off)."""
        first = server.reason == FIRST_CHECK
        if not self._pool.readmit(server):
            return
        if first:
            log.info("server %s is healthy; sending to it", server.url)
        else:
            log.info("server %s is healthy again; re-admitted", server.url)

    async def _check(self, server: Server) -> tuple[bool, str]:
        try:
            result = await server.checks.health(timeout=self._timeout_s)
        except SGLangError as e:
            return False, e.message
        return result.healthy, f"/health answered {result.status}"

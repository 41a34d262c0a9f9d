"""Stopping a running batch: drain in flight for a grace period, then abort on the servers.

Order: no new jobs (the feeder stops and the pool closes, so workers waiting for a server
leave), wait up to ``grace_s`` for in-flight requests (an abort request cuts the wait),
abort this run's requests on every server by their exact rids, wait ``ABORT_WAIT_S`` for
the aborted answers, and only then cancel what is left (a server that died never answers;
cancelling closes the connections, which SGLang also treats as an abort).

Exact rids, not the run's prefix: SGLang's tokenizer manager drops an ``/abort_request``
whose rid is not itself in flight (measured on 0.5.23, docs/sim.md), so one prefix call
aborted nothing and every stop waited ``ABORT_WAIT_S`` before cutting. A router is cut
instead (it has no ``/abort_request`` and passes the hang-up on); its workers get the
prefix, one call each, where ``--trust-router-workers`` allows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from eagle_tui.core.capture.dispatch import Server, ServerPool
from eagle_tui.core.clock import Clock

log = logging.getLogger(__name__)

ABORT_WAIT_S = 10.0
"""After aborting in-flight requests, how long to wait for their answers before cutting."""


class Drainer:
    """Runs the stop sequence for one batch's ``workers``."""

    def __init__(
        self,
        *,
        workers: Sequence[asyncio.Task[None]],
        pool: ServerPool,
        run_prefix: str,
        clock: Clock,
        abort: asyncio.Event,
        stop_feeding: Callable[[], None],
        redact: Callable[[str], str],
    ) -> None:
        self._workers = workers
        self._pool = pool
        self._run_prefix = run_prefix
        self._clock = clock
        self._abort = abort
        self._stop_feeding = stop_feeding
        self._redact = redact

    async def drain(self, grace_s: float) -> None:
        """Stop the batch; returns when every worker has ended."""
        self._stop_feeding()
        self._pool.close()  # workers waiting for a server leave; in-flight ones go on
        if await self._workers_done_within(grace_s):
            return
        await self._abort_in_flight()
        if await self._workers_done_within(ABORT_WAIT_S, abortable=False):
            return
        log.warning("in-flight requests did not answer the abort; cutting them")
        for worker in self._workers:
            worker.cancel()

    async def _workers_done_within(self, seconds: float, *, abortable: bool = True) -> bool:
        """True when every worker ended within ``seconds`` (or before an abort request)."""
        workers = asyncio.gather(*self._workers, return_exceptions=True)
        waits: list[asyncio.Future[object]] = [
            asyncio.ensure_future(_completion(workers)),
            asyncio.ensure_future(self._clock.sleep(seconds)),
        ]
        if abortable:
            waits.append(asyncio.ensure_future(self._abort.wait()))
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for wait in waits:
            wait.cancel()
        return workers.done()

    async def _abort_in_flight(self) -> None:
        """Abort this run's requests on every server that has some, one call per rid.
        Requests through a router are cut at once (it has no ``/abort_request``; it passes
        the hang-up on), and the prefix then goes to its workers directly to make sure."""
        pool = self._pool
        if not pool.in_flight:
            return
        log.info("aborting %d in-flight requests (rids %s…)", pool.in_flight, self._run_prefix)
        for server in pool.servers:
            if server.is_router and server.in_flight:
                log.info("cut %d requests through the router %s", server.cut_in_flight(),
                         server.url)
        calls = []
        for server in pool.servers:
            if server.in_flight:
                rids = self._rids_to_abort(server)
                server.aborted.update(rids)  # their aborted answers are ours, not failures
                calls += [server.checks.abort(rid) for rid in rids]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        failed = [outcome for outcome in outcomes if isinstance(outcome, Exception)]
        if failed:  # one line, not one per rid: a dead server fails them all alike
            log.warning("abort failed for %d of %d requests: %s", len(failed), len(calls),
                        self._redact(str(failed[0])))

    def _rids_to_abort(self, server: Server) -> list[str]:
        """What to send ``server``'s ``/abort_request``: its rids in flight, or for a router
        the run's prefix (its client passes it to the workers)."""
        return [self._run_prefix] if server.is_router else server.rids_in_flight()


async def _completion(future: Awaitable[object]) -> object:
    """Await ``future`` through a shield, so cancelling the wait leaves it running."""
    return await asyncio.shield(future)

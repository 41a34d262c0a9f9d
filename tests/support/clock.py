"""A clock for tests: it moves only when the test says (``advance(seconds)`` moves both times
forward and wakes every ``sleep`` whose deadline has passed). Satisfies ``core.clock.Clock``.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools


class FakeClock:
    """A clock that moves only when a test calls ``advance``.

    ``sleep`` returns once the clock has been advanced past its deadline; a zero or
    negative sleep still yields to the event loop once, like ``asyncio.sleep(0)``.
    """

    def __init__(self, *, start: float = 1000.0, wall_start: float = 1_800_000_000.0) -> None:
        self._mono = start
        self._wall_offset = wall_start - start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        """The fake monotonic time."""
        return self._mono

    def wall(self) -> float:
        """The fake wall time; moves in step with ``monotonic``."""
        return self._mono + self._wall_offset

    async def sleep(self, seconds: float) -> None:
        """Wait until ``advance`` has moved the clock ``seconds`` forward."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._mono + seconds, next(self._order), future))
        await future

    def advance(self, seconds: float) -> None:
        """Move time forward and wake the sleepers whose deadline has come."""
        self._mono += max(0.0, seconds)
        while self._sleepers and self._sleepers[0][0] <= self._mono:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    @property
    def sleepers(self) -> int:
        """How many ``sleep`` calls are still waiting (lets a test know a loop is parked)."""
        return sum(1 for _, _, f in self._sleepers if not f.done())

"""Run control shared by the engine's parts: pause gate, stop flag, watch budget."""

from __future__ import annotations

import asyncio


class RunControl:
    """Pause/resume/stop state of one batch (event-loop only).

    Pausing stops new attempts from starting; requests already in flight finish. Stopping
    releases the pause gate so everyone waiting at it sees the stop and leaves.
    """

    def __init__(self) -> None:
        self._unpaused = asyncio.Event()
        self._unpaused.set()
        self._stop = asyncio.Event()
        self.abort_now = False
        self._watch = 0

    @property
    def paused(self) -> bool:
        """True while paused (and not stopping)."""
        return not self._unpaused.is_set()

    @property
    def stopping(self) -> bool:
        """True once a stop was requested."""
        return self._stop.is_set()

    def pause(self) -> None:
        """Start no new attempts until ``resume``."""
        if not self.stopping:
            self._unpaused.clear()

    def resume(self) -> None:
        """Undo ``pause``."""
        self._unpaused.set()

    def request_stop(self) -> None:
        """Start no new attempts, ever; wake everyone waiting at the pause gate."""
        self._stop.set()
        self._unpaused.set()

    async def wait_unpaused(self) -> None:
        """Return at once unless paused; then when resumed or stopped."""
        await self._unpaused.wait()

    async def wait_stop(self) -> None:
        """Return once a stop was requested."""
        await self._stop.wait()

    def watch(self, count: int) -> None:
        """Stream (and report token deltas of) the next ``count`` requests sent."""
        if count < 0:
            raise ValueError("watch count must be >= 0")
        self._watch += count

    def take_watch(self) -> bool:
        """True (once per watched request) when the next request should be streamed."""
        if self._watch <= 0:
            return False
        self._watch -= 1
        return True

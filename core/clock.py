"""An injectable clock: monotonic time for durations, wall time for records, and sleep.

Everything that measures or waits on time takes a ``Clock`` so tests can drive it with a
fake one instead of sleeping (``tests/support/clock.py``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """What a time-dependent component needs to know about time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (for durations)."""
        ...

    def wall(self) -> float:
        """Seconds since the Unix epoch (for records a human reads)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this clock."""
        ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    def wall(self) -> float:
        """``time.time()``."""
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep``."""
        await asyncio.sleep(max(0.0, seconds))

"""Poll ``/health`` at a steady cadence, never overlapping itself, never raising.

Each probe has an explicit short timeout. A probe starts only when the previous one has
finished and the interval since the previous start has passed, so a slow server is never
hit by a pile of concurrent probes (sglang#35884: timed-out probes pile up server-side).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum

from eagle_tui.core.clock import Clock
from eagle_tui.core.errors import ServerBusy, ServerTimeout, ServerUnreachable
from eagle_tui.core.sglang.types import HealthResult

HealthCheck = Callable[[float], Awaitable[HealthResult]]
"""``await check(timeout_s)`` → the ``/health`` answer (``SGLangClient.health``)."""


class HealthOutcome(StrEnum):
    """What one probe found."""

    OK = "ok"  # 200
    UNHEALTHY = "unhealthy"  # an HTTP answer other than 200 (503 while starting or draining)
    REFUSED = "refused"  # nothing listening (connection refused or reset)
    TIMEOUT = "timeout"  # no answer within the timeout
    ERROR = "error"  # anything else: garbage, a protocol error, a bug


@dataclass(frozen=True)
class HealthProbe:
    """One ``/health`` probe: outcome, HTTP status, latency, and when it finished."""

    outcome: HealthOutcome
    status: int | None
    latency_s: float | None
    detail: str
    at: float
    seq: int

    @property
    def answered(self) -> bool:
        """True when an HTTP server answered (anything but refused/timeout/error)."""
        return self.outcome in (HealthOutcome.OK, HealthOutcome.UNHEALTHY)

    def describe(self) -> str:
        """``200 in 1.02 s`` / ``connection refused`` / ``timeout after 3.0 s``."""
        if self.answered:
            return f"{self.status} in {self.latency_s or 0.0:.2f} s"
        return self.detail


class HealthPoller:
    """Keeps the latest ``/health`` probe; ``kick()`` starts one when due and idle."""

    def __init__(
        self,
        check: HealthCheck,
        *,
        clock: Clock,
        interval_s: float = 1.0,
        timeout_s: float = 3.0,
        backstop_s: float = 1.0,
        keep: int = 60,
    ) -> None:
        self._check = check
        self._clock = clock
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.backstop_s = backstop_s
        """How long past ``timeout_s`` a check that ignores its own timeout is waited for."""
        self._task: asyncio.Task[HealthProbe] | None = None
        self._next_start = float("-inf")
        self._seq = 0
        self.latest: HealthProbe | None = None
        self.recent: deque[HealthProbe] = deque(maxlen=keep)

    @property
    def busy(self) -> bool:
        """True while a probe is in flight."""
        return self._task is not None and not self._task.done()

    def kick(self, *, force: bool = False) -> None:
        """Start a probe in the background if none is running and one is due (or ``force``)."""
        if self.busy or (not force and self._clock.monotonic() < self._next_start):
            return
        self._next_start = self._clock.monotonic() + self.interval_s
        self._task = asyncio.get_running_loop().create_task(self.poll_once())

    async def wait_idle(self) -> HealthProbe | None:
        """Wait for the probe in flight (if any) and return the latest probe."""
        if self._task is not None:
            await asyncio.wait({self._task})
        return self.latest

    async def poll_once(self) -> HealthProbe:
        """Probe now and record the result; never raises (except cancellation)."""
        started = self._clock.monotonic()
        outcome, status, detail = await self._classify()
        self._seq += 1
        latency = self._clock.monotonic() - started if status is not None else None
        probe = HealthProbe(outcome, status, latency, detail, self._clock.monotonic(), self._seq)
        self.latest = probe
        self.recent.append(probe)
        return probe

    async def _classify(self) -> tuple[HealthOutcome, int | None, str]:
        try:
            result = await asyncio.wait_for(self._check(self.timeout_s),
                                            self.timeout_s + self.backstop_s)
        except ServerUnreachable as exc:
            return HealthOutcome.REFUSED, None, _unreachable(exc)
        except (ServerTimeout, TimeoutError):
            return HealthOutcome.TIMEOUT, None, f"timeout after {self.timeout_s:.1f} s"
        except ServerBusy as exc:
            return HealthOutcome.UNHEALTHY, exc.status or 503, "503"
        except Exception as exc:  # garbage bodies, protocol errors, bugs: report, go on
            status = getattr(exc, "status", None)
            return HealthOutcome.ERROR, status if isinstance(status, int) else None, _short(exc)
        if result.status == 200:
            return HealthOutcome.OK, 200, "200"
        return HealthOutcome.UNHEALTHY, result.status, str(result.status)

    async def aclose(self) -> None:
        """Cancel the probe in flight."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _unreachable(exc: ServerUnreachable) -> str:
    """``connection refused``, or what else kept the probe from connecting (a name that
    does not resolve): the cause alone, not the client's whole sentence around it."""
    lines = str(exc.__cause__ or "").splitlines()
    cause = lines[0] if lines else ""
    if not cause or any(word in cause.lower() for word in _REFUSALS):
        return "connection refused"
    return f"cannot connect: {cause[:80]}"


_REFUSALS = ("refused", "all connection attempts failed")
"""How httpx says nothing listens (one address, or each address a name resolved to)."""


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text[:200]}"

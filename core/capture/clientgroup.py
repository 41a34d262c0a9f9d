"""Several small HTTP connection pools per server instead of one large one.

httpcore's pool re-examines every connection it holds (an expiry check with a ``poll``
system call each) whenever a request starts or ends, so its cost per request grows with
the pool: at 32 connections that was about half of the capture's CPU time. A group of
``ceil(limit / POOL_SIZE)`` clients of ``POOL_SIZE`` connections each, with each request
sent through the least busy one, kept that scan short whatever the concurrency.

The capture's clients now run on ``core.sglang.transport.LeanTransport``, whose pool costs
the same at any size (a bare loop on it: 1.26 and 1.24 CPU-ms per sample with one pool of
256, 1.27 and 1.33 with 32 pools of 8), so the groups no longer save anything; they stay
because they cost nothing measurable and a client built with httpx's default transport
(``SGLangClient`` without one) still has httpcore's pool.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from eagle_tui.core.capture.dispatch import ServerClient
from eagle_tui.core.sglang.types import (
    GenerateRequest,
    GenerateResult,
    HealthResult,
    ModelInfo,
    ServerInfo,
    TokenDelta,
)

POOL_SIZE = 8


def pools_for(limit: int) -> int:
    """How many pools of POOL_SIZE serve ``limit`` requests in flight."""
    return max(1, -(-limit // POOL_SIZE))


class ClientGroup:
    """One server's clients; implements the ``ServerClient`` protocol of dispatch."""

    def __init__(self, clients: Sequence[ServerClient]) -> None:
        if not clients:
            raise ValueError("a client group needs at least one client")
        self._clients = list(clients)
        self._busy = [0] * len(self._clients)
        self.base_url = self._clients[0].base_url

    def _pick(self) -> int:
        busy = self._busy
        return busy.index(min(busy))

    async def generate(
        self, request: GenerateRequest, *, timeout: float | None = None
    ) -> GenerateResult:
        """``generate`` through the least busy client."""
        index = self._pick()
        self._busy[index] += 1
        try:
            return await self._clients[index].generate(request, timeout=timeout)
        finally:
            self._busy[index] -= 1

    async def generate_streaming(
        self,
        request: GenerateRequest,
        on_delta: Callable[[TokenDelta], None] | None = None,
        *,
        timeout: float | None = None,
    ) -> GenerateResult:
        """``generate_streaming`` through the least busy client."""
        index = self._pick()
        self._busy[index] += 1
        try:
            return await self._clients[index].generate_streaming(
                request, on_delta, timeout=timeout)
        finally:
            self._busy[index] -= 1

    async def health(self, *, generate: bool = False, timeout: float | None = None) -> (
        HealthResult
    ):
        """``/health`` through the first client."""
        return await self._clients[0].health(generate=generate, timeout=timeout)

    async def abort(self, rid: str) -> None:
        """``/abort_request`` through the first client."""
        await self._clients[0].abort(rid)

    async def model_info(self) -> ModelInfo:
        """``/model_info`` through the first client."""
        return await self._clients[0].model_info()

    async def server_info(self) -> ServerInfo:
        """``/server_info`` through the first client."""
        return await self._clients[0].server_info()

    async def aclose(self) -> None:
        """Close every client."""
        for client in self._clients:
            await client.aclose()

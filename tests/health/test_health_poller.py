"""The /health poller: outcomes, no overlap, cadence on an injected clock, garbage tolerance."""

from __future__ import annotations

import asyncio

import httpx
from support.clock import FakeClock

from eagle_tui.core.errors import ProtocolError, ServerBusy, ServerTimeout, ServerUnreachable
from eagle_tui.core.health.poller import HealthOutcome, HealthPoller
from eagle_tui.core.sglang.client import SGLangClient
from eagle_tui.core.sglang.types import HealthResult
from eagle_tui.core.urls import ServerURL


def poller_for(check: object, clock: FakeClock | None = None) -> HealthPoller:
    return HealthPoller(check, clock=clock or FakeClock(), interval_s=1.0, timeout_s=0.5)  # type: ignore[arg-type]


async def test_outcomes_of_every_kind_of_answer() -> None:
    answers: list[object] = [
        HealthResult(200, 0.01),
        HealthResult(503, 0.01),
        ServerUnreachable("refused", url="u"),
        ServerTimeout("slow", url="u"),
        ServerBusy("busy", url="u", status=503),
        ProtocolError("garbage body", url="u"),
        ValueError("a bug in a transport"),
    ]

    async def check(timeout: float) -> HealthResult:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, HealthResult)
        return answer

    poller = poller_for(check)
    outcomes = [(await poller.poll_once()).outcome for _ in range(7)]
    assert outcomes == [
        HealthOutcome.OK,
        HealthOutcome.UNHEALTHY,
        HealthOutcome.REFUSED,
        HealthOutcome.TIMEOUT,
        HealthOutcome.UNHEALTHY,
        HealthOutcome.ERROR,
        HealthOutcome.ERROR,
    ]
    assert poller.latest is not None and "ValueError" in poller.latest.detail
    assert [p.seq for p in poller.recent] == list(range(1, 8))


async def test_a_probe_never_overlaps_the_previous_one_and_keeps_its_cadence() -> None:
    clock = FakeClock()
    release = asyncio.Event()
    calls = 0

    async def check(timeout: float) -> HealthResult:
        nonlocal calls
        calls += 1
        await release.wait()
        return HealthResult(200, 0.0)

    poller = poller_for(check, clock)
    poller.kick()
    await asyncio.sleep(0)
    clock.advance(5)
    poller.kick()  # due, but one is still in flight
    poller.kick(force=True)
    await asyncio.sleep(0)
    assert calls == 1 and poller.busy
    release.set()
    await poller.wait_idle()
    poller.kick()  # due: 5 s since the last start
    await poller.wait_idle()
    assert calls == 2
    poller.kick()  # not due: no time has passed
    await poller.wait_idle()
    assert calls == 2
    clock.advance(1)
    poller.kick()
    await poller.wait_idle()
    assert calls == 3


async def test_with_the_real_client_over_a_mock_transport() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path != "/health":
            return httpx.Response(404)
        raise httpx.ConnectError("connection refused", request=request)

    client = SGLangClient(ServerURL.parse("http://127.0.0.1:9"),
                          transport=httpx.MockTransport(handler))

    async def check(timeout: float) -> HealthResult:
        return await client.health(timeout=timeout)

    try:
        probe = await poller_for(check).poll_once()
    finally:
        await client.aclose()
    assert probe.outcome == HealthOutcome.REFUSED
    assert not probe.answered


async def test_a_hanging_check_is_cut_by_the_pollers_own_timeout() -> None:
    async def check(timeout: float) -> HealthResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    poller = HealthPoller(check, clock=FakeClock(), interval_s=1.0, timeout_s=0.01,
                          backstop_s=0.01)
    probe = await poller.poll_once()
    assert probe.outcome == HealthOutcome.TIMEOUT
    await poller.aclose()

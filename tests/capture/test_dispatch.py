"""The server pool, health monitor, retry policy and error classification, on a fake clock."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from support.clock import FakeClock

from eagle_tui.core import errors
from eagle_tui.core.capture.config import CaptureConfig, Redactor, RetryPolicy, config_to_json
from eagle_tui.core.capture.dispatch import (
    NoServerLeft,
    PoolClosed,
    Server,
    ServerPool,
    ServerState,
)
from eagle_tui.core.capture.healthloop import HealthMonitor
from eagle_tui.core.capture.retry import ServerAction, classify
from eagle_tui.core.capture.rids import RidAllocator
from eagle_tui.core.sglang import SGLangClient
from eagle_tui.core.sglang.types import FinishReason, GenerateResult, HealthResult
from eagle_tui.core.urls import ServerURL


class StubClient:
    """Only what the pool and the health monitor touch."""

    def __init__(self, url: str) -> None:
        self.base_url = url
        self.status = 200
        self.checks = 0

    async def health(self, *, generate: bool = False, timeout: float | None = None) -> (
        HealthResult
    ):
        self.checks += 1
        if self.status == 0:
            raise errors.ServerUnreachable("refused", url=self.base_url)
        return HealthResult(self.status, 0.0)

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the pool should not call {name}")


def pool_of(*limits: int, clock: FakeClock | None = None, **kwargs: Any) -> ServerPool:
    servers = [Server(StubClient(f"http://s{i}:1"), limit)  # type: ignore[arg-type]
               for i, limit in enumerate(limits)]
    return ServerPool(servers, clock or FakeClock(), **kwargs)


async def test_least_in_flight_first() -> None:
    pool = pool_of(2, 3)
    picks = [(await pool.acquire()).url for _ in range(5)]
    assert picks == ["http://s0:1", "http://s1:1", "http://s0:1", "http://s1:1", "http://s1:1"]
    assert pool.in_flight == 5


async def test_acquire_waits_for_a_free_slot() -> None:
    pool = pool_of(1)
    first = await pool.acquire()
    waiting = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0)
    assert not waiting.done()
    pool.release(first, ok=True)
    assert await waiting is first
    assert first.succeeded == 1 and first.sent == 2


async def test_paused_server_gets_nothing_until_readmitted() -> None:
    pool = pool_of(1, 1)
    a, b = pool.servers
    pool.pause(a, "health check failed")
    assert [await pool.acquire() for _ in range(1)] == [b]
    waiting = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0)
    assert not waiting.done()
    pool.readmit(a)
    assert await waiting is a
    assert a.state is ServerState.READY and a.reason == ""


async def test_a_retry_avoids_the_server_that_failed() -> None:
    pool = pool_of(4, 4)
    a, b = pool.servers
    assert await pool.acquire(avoid=a) is b
    assert await pool.acquire(avoid=a) is b  # even when a is less loaded
    pool.pause(b, "down")
    assert await pool.acquire(avoid=a) is a  # but a is better than nothing


async def test_refused_everywhere_raises_and_close_wakes_waiters() -> None:
    pool = pool_of(1)
    [server] = pool.servers
    await pool.acquire()
    waiting = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0)
    pool.refuse(server, "401 Unauthorized")
    with pytest.raises(NoServerLeft, match="401"):
        await waiting
    other = pool_of(1)
    await other.acquire()
    blocked = asyncio.ensure_future(other.acquire())
    await asyncio.sleep(0)
    other.close()
    with pytest.raises(PoolClosed):
        await blocked


async def test_error_streak_pauses_the_server() -> None:
    pool = pool_of(8, error_streak_limit=3)
    [server] = pool.servers
    for _ in range(2):
        pool.note_error(server)
    assert server.state is ServerState.READY
    pool.note_error(server)
    assert server.state is ServerState.PAUSED and "3 failed requests" in server.reason


async def test_down_for_counts_from_the_last_ready_server() -> None:
    clock = FakeClock()
    pool = pool_of(1, 1, clock=clock)
    a, b = pool.servers
    pool.pause(a, "x")
    clock.advance(5)
    assert pool.down_for() == 0
    pool.pause(b, "y")
    clock.advance(7)
    assert pool.down_for() == 7
    pool.readmit(b)
    assert pool.down_for() == 0


async def test_health_monitor_pauses_after_two_failures_and_readmits() -> None:
    clock = FakeClock()
    pool = pool_of(1, clock=clock)
    [server] = pool.servers
    stub: StubClient = server.client  # type: ignore[assignment]
    monitor = HealthMonitor(pool, clock, interval_s=10, paused_interval_s=1)
    stub.status = 503
    assert not await monitor.probe(server)
    assert server.state is ServerState.READY
    stub.status = 0
    assert not await monitor.probe(server)
    assert server.state is ServerState.PAUSED and "refused" in server.reason
    stub.status = 200
    assert await monitor.probe(server)
    assert server.state is ServerState.READY


async def test_health_monitor_rechecks_a_paused_server_at_once() -> None:
    clock = FakeClock()
    pool = pool_of(1, clock=clock, start_paused=True)
    [server] = pool.servers
    stub: StubClient = server.client  # type: ignore[assignment]
    monitor = HealthMonitor(pool, clock, interval_s=600, paused_interval_s=1)
    task = asyncio.ensure_future(monitor.run())
    for _ in range(5):
        await asyncio.sleep(0)
    assert server.state is ServerState.READY and stub.checks == 1
    pool.pause(server, "connection_lost")  # dispatch saw it fail: no 600 s wait
    for _ in range(5):
        await asyncio.sleep(0)
    assert stub.checks == 2 and server.state is ServerState.READY
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def test_backoff_doubles_with_jitter_and_caps() -> None:
    policy = RetryPolicy(max_attempts=5, base_delay_s=1.0, max_delay_s=8.0)
    rng = random.Random(1)
    for attempt, step in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 8.0)]:
        delays = [policy.delay(attempt, rng) for _ in range(50)]
        assert all(step / 2 <= d <= step for d in delays)
        assert len(set(delays)) > 40  # jittered


def aborted(status: int | None) -> errors.RequestAborted:
    partial = GenerateResult("r", (1,), FinishReason("abort", status_code=status))
    return errors.RequestAborted("aborted", partial=partial, status=status)


@pytest.mark.parametrize(
    ("error", "kind", "retry", "counts", "action"),
    [
        (errors.ServerUnreachable("x"), "unreachable", True, False, ServerAction.PAUSE),
        (errors.ConnectionLost("x"), "connection_lost", True, True, ServerAction.PAUSE),
        (errors.ServerBusy("x"), "busy", True, True, ServerAction.PAUSE),
        (errors.ServerTimeout("x"), "timeout", True, True, ServerAction.NONE),
        (errors.ServerFault("x"), "server_error", True, True, ServerAction.NONE),
        (errors.ProtocolError("x"), "bad_response", True, True, ServerAction.NONE),
        (errors.Unauthorized("x"), "unauthorized", True, False, ServerAction.REFUSE),
        (errors.ContextTooLong("x"), "context_too_long", False, True, ServerAction.NONE),
        (errors.RequestRejected("x"), "rejected", False, True, ServerAction.NONE),
        (errors.DuplicateRequestId("x"), "duplicate_rid", True, True, ServerAction.NONE),
        (aborted(None), "aborted", True, True, ServerAction.NONE),
        (aborted(503), "aborted", True, True, ServerAction.NONE),
        (errors.StreamError("x", retryable=False), "stream_error", False, True,
         ServerAction.NONE),
        (KeyError("bug"), "internal", False, False, ServerAction.NONE),
    ],
)
def test_classification(error: BaseException, kind: str, retry: bool, counts: bool,
                        action: ServerAction) -> None:
    verdict = classify(error)
    assert (verdict.kind, verdict.retry, verdict.counts, verdict.server) == (
        kind, retry, counts, action)


def test_rids_have_one_length_and_never_prefix_each_other() -> None:
    rids = RidAllocator("abcd1234")
    issued = [rids.next() for _ in range(1200)]
    assert issued[0] == "cap-abcd1234-000000000000"
    assert len({len(r) for r in issued}) == 1 and len(set(issued)) == 1200
    assert not any(a != b and b.startswith(a) for a in issued[:50] for b in issued)
    assert all(r.startswith(rids.run_prefix) for r in issued)
    assert not RidAllocator().run_prefix.startswith("HEALTH_CHECK")
    assert RidAllocator().tag != RidAllocator().tag


def test_configs_and_messages_lose_their_secrets(tmp_path: Any) -> None:
    assert ServerURL.parse("http://user:sk-123@host:30000/").public == "http://host:30000"
    assert ServerURL.parse("http://[::1]:30000/").public == "http://[::1]:30000"
    # User info and an API key together are refused (issue 12), so each is checked alone.
    config = CaptureConfig(prompts=tmp_path / "p", out_dir=tmp_path / "o",
                           servers=(ServerURL.parse("http://u:sk-123@host:30000"),),
                           tokenizer=tmp_path)
    assert "sk-123" not in repr(config) and b"sk-123" not in config_to_json(config)
    assert Server(SGLangClient(config.servers[0]), 1).url == "http://host:30000"
    keyed = CaptureConfig(prompts=tmp_path / "p", out_dir=tmp_path / "o",
                          servers=(ServerURL.parse("http://host:30000"),), tokenizer=tmp_path,
                          api_key="sk-123")
    assert Redactor(keyed).clean("refused [http://host:30000] sk-123") == (
        "refused [http://host:30000] ***")
    assert "sk-123" not in repr(keyed)

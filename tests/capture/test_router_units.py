"""Capture through a router, in process: a fake of SGLang's router (its ``/workers``,
``/readiness``, 503 ``no_available_workers``, no ``/abort_request``) and fake workers behind it.
The real router runs in ``test_router_real.py``; these pin the decisions one by one."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_engine_fakes import FakeSGLang, bundled_tokenizer, make_config, rows_of, write_prompts

from eagle_tui.core.capture.config import RetryPolicy
from eagle_tui.core.capture.dispatch import Server, ServerPool
from eagle_tui.core.capture.engine import CaptureEngine
from eagle_tui.core.capture.retry import classify
from eagle_tui.core.capture.routed import RoutedClient, check_sampling
from eagle_tui.core.clock import SystemClock
from eagle_tui.core.errors import ConfigError, ConnectionLost, NoWorkerAvailable
from eagle_tui.core.sglang.client import SGLangClient
from eagle_tui.core.sglang.router import TRUST_LISTED, RouterProbe, dropped_sampling_keys
from eagle_tui.core.sglang.types import SamplingParams
from eagle_tui.core.sglang.wire import error_for_status
from eagle_tui.core.urls import ServerURL

WORKERS = ("http://worker-a:30000", "http://worker-b:30000")


def router_error(status: int, code: str) -> httpx.Response:
    return httpx.Response(status, json={"error": {"type": "x", "code": code, "message": code}})


class FakeRouter(FakeSGLang):
    """The router's own endpoints over a FakeSGLang that does the generating."""

    def __init__(self) -> None:
        super().__init__("http://fake-router:30000")
        self.listed = {url: True for url in WORKERS}
        self.router_aborts = 0

    async def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/workers":
            workers = [{"url": u, "is_healthy": h, "load": 0} for u, h in self.listed.items()]
            return httpx.Response(200, json={"workers": workers, "total": len(workers)})
        if path == "/readiness":
            return httpx.Response(200, json={"status": "ready"})
        if path == "/abort_request":
            self.router_aborts += 1
            return httpx.Response(404)
        if path == "/generate" and self.faults and self.faults[0] == "no_worker":
            self.faults.popleft()
            return router_error(503, "no_available_workers")
        return await super().handle(request)


class FakeWorkers:
    """What each worker answers when asked directly."""

    def __init__(self) -> None:
        self.health = {url: 200 for url in WORKERS}
        self.aborts: list[tuple[str, dict[str, Any]]] = []

    def transport(self, url: str) -> httpx.MockTransport:
        async def handle(request: httpx.Request) -> httpx.Response:
            if request.url.path == "/abort_request":
                self.aborts.append((url, json.loads(request.content)))
                return httpx.Response(200)
            status = self.health[url]
            if status == 0:
                raise httpx.ConnectError("refused") from ConnectionRefusedError(111, "refused")
            return httpx.Response(status)

        return httpx.MockTransport(handle)


class FakeProbe(RouterProbe):
    """A RouterProbe whose direct worker clients talk to ``workers``."""

    def __init__(self, client: SGLangClient, workers: FakeWorkers) -> None:
        super().__init__(client, access=TRUST_LISTED)
        self._fakes = workers

    def _worker(self, url: ServerURL) -> SGLangClient:
        if url.public not in self._workers:
            self._workers[url.public] = SGLangClient(
                url, transport=self._fakes.transport(url.public))
        self.contacted.add(url.public)
        return self._workers[url.public]


def routed(router: FakeRouter, workers: FakeWorkers) -> RoutedClient:
    return RoutedClient(router.client(), FakeProbe(router.client(), workers))


def test_router_errors_are_typed() -> None:
    no_worker = error_for_status(503, router_error(503, "no_available_workers").content, url="u")
    lost = error_for_status(500, router_error(500, "call_upstream_request_error").content,
                            url="u")
    assert isinstance(no_worker, NoWorkerAvailable) and isinstance(lost, ConnectionLost)
    free = classify(no_worker)
    assert free.retry and not free.counts and free.server.value == "pause"
    assert classify(lost).counts


def test_dropped_keys() -> None:
    assert dropped_sampling_keys(["temperature", "logit_bias", "stop_regex"]) == [
        "logit_bias", "stop_regex"]


async def test_health_is_the_workers_not_the_routers() -> None:
    router, workers = FakeRouter(), FakeWorkers()
    client = routed(router, workers)
    assert (await client.health()).status == 200
    workers.health = {WORKERS[0]: 0, WORKERS[1]: 503}  # one dead, one warming up again
    assert (await client.health()).status == 503
    assert client.view is not None
    assert [w.state for w in client.view.workers] == ["down", "unhealthy"]
    workers.health[WORKERS[1]] = 200
    router.listed[WORKERS[1]] = False  # healthy, but the router does not send to it yet
    assert (await client.health()).status == 503
    assert client.view.workers[1].state == "joining"
    router.listed[WORKERS[1]] = True
    assert (await client.health()).status == 200
    await client.aclose()


async def test_a_router_with_no_worker_costs_rows_no_attempt(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", 30)
    router, workers = FakeRouter(), FakeWorkers()
    router.faults.extend(["no_worker"] * 3)
    config = make_config(tmp_path, [router.url], retry=RetryPolicy(max_attempts=1),
                         health_retry_s=0.01)
    engine = CaptureEngine(config, tokenizer=bundled_tokenizer(),
                           client_factory=lambda url: routed(router, workers))
    summary = await engine.run()
    assert summary.progress.counts.failed == 0 and summary.progress.counts.done == 30
    assert summary.progress.errors == {"no_worker": 3}
    assert len(rows_of(config.out_dir)) == 30


async def test_abort_cuts_router_requests_at_once_and_aborts_on_the_workers(
    tmp_path: Path,
) -> None:
    write_prompts(tmp_path / "prompts.jsonl", 20)
    router, workers = FakeRouter(), FakeWorkers()
    router.fault_for = lambda prompt: "hang"  # the router never passes an abort on
    config = make_config(tmp_path, [router.url], concurrency=3, stop_grace_s=60.0)
    engine = CaptureEngine(config, tokenizer=bundled_tokenizer(),
                           client_factory=lambda url: routed(router, workers))
    run = asyncio.ensure_future(engine.run())
    while router.in_flight < 6:  # 3 per listed worker
        await asyncio.sleep(0.01)
    started = time.monotonic()
    engine.stop(abort=True)
    summary = await asyncio.wait_for(run, 10)
    assert time.monotonic() - started < 2.0, "no 10 s wait for an abort the router ignores"
    assert summary.state == "stopped" and summary.progress.counts.done == 0
    assert summary.progress.counts.interrupted == 6 and summary.progress.counts.failed == 0
    assert router.router_aborts == 0, "no futile /abort_request to the router"
    assert {url for url, _ in workers.aborts} == set(WORKERS)


async def test_sampling_keys_a_router_drops_are_refused_or_forced() -> None:
    router, workers = FakeRouter(), FakeWorkers()
    side = routed(router, workers)
    pool = ServerPool([Server(side.client, 4, router=side)], SystemClock())
    params = [SamplingParams(max_new_tokens=8, extra={"logit_bias": {"1": 2.0}})]
    with pytest.raises(ConfigError, match=r"logit_bias.*--force"):
        check_sampling(pool, params, force=False)
    assert check_sampling(pool, params, force=True) == [
        "forced past a router dropping sampling_params ['logit_bias']"]
    assert check_sampling(pool, [SamplingParams(max_new_tokens=8)], force=False) == []
    plain = ServerPool([Server(FakeSGLang().client(), 4)], SystemClock())
    assert check_sampling(plain, params, force=False) == []

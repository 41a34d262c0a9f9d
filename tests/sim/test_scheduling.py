"""Continuous batching: abort by prefix, the waiting queue, duplicate rids, disconnects, load."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest
from sim_helpers import chat_prompt, recording
from support.waiting import async_wait_until

from eagle_tui.core.sim.launcher import SimProcess

pytestmark = pytest.mark.slow

RUNNING_ABORT = {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}


@pytest.fixture(scope="module")
def slow_sim() -> Iterator[SimProcess]:
    """Slow enough to catch requests in flight: 100 tokens/s, 3 running at most."""
    args = ["--time-scale", "0", "--tokens-per-s", "100", "--ttft", "0",
            "--max-running-requests", "3", "--capacity", "2"]
    with SimProcess(args) as sim:
        sim.wait_ready(timeout=60)
        yield sim


@pytest.fixture
async def client(slow_sim: SimProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=slow_sim.url, timeout=30) as http:
        yield http
        await http.post("/abort_request", json={"abort_all": True})
        await until(lambda: state(http), lambda s: s["in_flight"] == 0)


def long_request(rid: str, tokens: int = 2000) -> dict[str, Any]:
    return {"input_ids": chat_prompt(rid), "rid": rid,
            "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True}}


async def state(client: httpx.AsyncClient) -> dict[str, Any]:
    result: dict[str, Any] = (await client.get("/sim/state")).json()
    return result


async def until(probe: Callable[[], Awaitable[dict[str, Any]]],
                condition: Callable[[dict[str, Any]], bool], timeout: float = 10.0) -> None:
    """Until ``condition`` holds of what ``probe`` returns (the server reports; no fixed sleeps)."""
    async def holds() -> bool:
        return condition(await probe())

    await async_wait_until(holds, timeout, "the sim's state", every=0.02)


async def test_abort_matches_rid_prefixes(client: httpx.AsyncClient) -> None:
    tasks = {rid: asyncio.create_task(client.post("/generate", json=long_request(rid)))
             for rid in ("job-1", "job-10", "other")}
    await until(lambda: state(client), lambda s: s["running"] == 3 and s["generation_tokens"] > 3)
    assert (await client.post("/abort_request", json={"rid": "job-1"})).status_code == 200
    for rid in ("job-1", "job-10"):
        response = await tasks[rid]
        assert response.status_code == 200
        body = response.json()
        assert body["meta_info"]["finish_reason"] == RUNNING_ABORT
        assert body["meta_info"]["completion_tokens"] == len(body["output_ids"]) > 0
    assert not tasks["other"].done()
    response = await client.post("/abort_request", json={"rid": "no-such-rid"})
    assert response.status_code == 200 and response.content == b""
    await client.post("/abort_request", json={"rid": "oth"})  # not a rid in flight: dropped
    tokens = (await state(client))["generation_tokens"]
    await until(lambda: state(client), lambda s: s["generation_tokens"] > tokens + 5)
    assert not tasks["other"].done()
    await client.post("/abort_request", json={"abort_all": True})
    assert (await tasks["other"]).json()["meta_info"]["finish_reason"]["type"] == "abort"


@pytest.mark.parametrize("how", ["prefix", "exact"])
async def test_aborts_end_what_they_ended_on_real_sglang(client: httpx.AsyncClient,
                                                         how: str) -> None:
    """The recorded exchange replayed: a prefix that is no rid in flight aborts nothing,
    exact rids abort at once (tests/fixtures/realsrv/abort_prefix_vs_exact.json)."""
    recorded = recording("abort_prefix_vs_exact.json")[how]
    rids = [entry["request"]["body"]["rid"] for entry in recorded["generates"]]
    tasks = [asyncio.create_task(client.post("/generate", json=long_request(rid, 300)))
             for rid in rids]
    await until(lambda: state(client), lambda s: s["running"] == 2 and s["generation_tokens"] > 3)
    for sent in recorded["aborts"]:
        response = await client.post("/abort_request", json=sent["request"]["body"])
        assert (response.status_code, response.text) == (sent["status"], sent["body"])
    answers = [(await task).json()["meta_info"] for task in tasks]
    assert [a["finish_reason"]["type"] for a in answers] == [
        entry["finish_reason"]["type"] for entry in recorded["generates"]]


async def test_queue_beyond_max_running_and_abort_while_waiting(
        client: httpx.AsyncClient) -> None:
    running = [asyncio.create_task(client.post("/generate", json=long_request(f"run-{i}")))
               for i in range(3)]
    await until(lambda: state(client), lambda s: s["running"] == 3)
    queued = asyncio.create_task(client.post("/generate", json=long_request("queued-1")))
    await until(lambda: state(client), lambda s: s["queued"] == 1)
    await client.post("/abort_request", json={"rid": "queued-1"})
    body = (await queued).json()
    assert body["meta_info"]["finish_reason"] == {"type": "abort",
                                                  "message": "Abort in waiting queue"}
    assert body["output_ids"] == [] and body["meta_info"]["completion_tokens"] == 0
    await client.post("/abort_request", json={"abort_all": True})
    await asyncio.gather(*running)


async def test_flush_cache_is_refused_while_requests_run(client: httpx.AsyncClient) -> None:
    task = asyncio.create_task(client.post("/generate", json=long_request("busy-1")))
    await until(lambda: state(client), lambda s: s["running"] == 1)
    refused = await client.post("/flush_cache")
    assert refused.status_code == 400 and refused.text.startswith("Cache flushed.")
    await client.post("/abort_request", json={"rid": "busy-1"})
    await task
    assert (await client.get("/flush_cache")).status_code == 200


async def test_duplicate_rid_in_flight(client: httpx.AsyncClient) -> None:
    first = asyncio.create_task(client.post("/generate", json=long_request("dup-1")))
    await until(lambda: state(client), lambda s: s["running"] == 1)
    second = await client.post("/generate", json=long_request("dup-1"))
    assert second.status_code == 400
    assert second.json() == {"error": {"message": "Duplicate request ID detected: dup-1"}}
    await client.post("/abort_request", json={"rid": "dup-1"})
    assert (await first).status_code == 200
    again = await client.post("/generate", json=long_request("dup-1", tokens=2))
    assert again.status_code == 200  # the rid is free once the first finished


async def test_closing_a_stream_aborts_the_request(client: httpx.AsyncClient) -> None:
    body = {**long_request("leaver"), "stream": True}
    async with client.stream("POST", "/generate", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                break
    await until(lambda: state(client), lambda s: s["in_flight"] == 0 and s["running"] == 0)


async def test_closing_a_plain_request_aborts_it(slow_sim: SimProcess,
                                                 client: httpx.AsyncClient) -> None:
    async with httpx.AsyncClient(base_url=slow_sim.url, timeout=30) as leaver:
        task = asyncio.create_task(leaver.post("/generate", json=long_request("plain-leaver")))
        await until(lambda: state(client), lambda s: s["running"] == 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    await until(lambda: state(client), lambda s: s["in_flight"] == 0 and s["running"] == 0)


async def test_more_requests_than_capacity_slow_each_one_down(client: httpx.AsyncClient) -> None:
    async def latency(count: int) -> float:
        bodies = [long_request(f"load-{count}-{i}", tokens=30) for i in range(count)]
        answers = await asyncio.gather(*(client.post("/generate", json=b) for b in bodies))
        return max(a.json()["meta_info"]["e2e_latency"] for a in answers)

    alone = await latency(1)
    crowded = await latency(3)  # capacity 2: steps take 3/2 as long
    assert alone >= 0.25  # 30 tokens at 100 tokens/s
    assert crowded > alone * 1.25

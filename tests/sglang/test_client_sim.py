"""The typed client against the simulated server's start-up, shutdown and faults,
over real sockets to a separate process."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest

from eagle_tui.core import errors, kimi
from eagle_tui.core.sglang import GenerateRequest, SamplingParams, SGLangClient
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.urls import ServerURL

pytestmark = pytest.mark.slow

StartSim = Callable[..., SimProcess]

PROMPT = (kimi.IM_USER, 1200, 1300, kimi.IM_END, kimi.IM_ASSISTANT, 1500, kimi.IM_MIDDLE,
          kimi.THINK)


def request(max_new_tokens: int = 16, **kwargs: object) -> GenerateRequest:
    return GenerateRequest(input_ids=PROMPT, sampling=SamplingParams(
        max_new_tokens=max_new_tokens, temperature=0.0, **kwargs))  # type: ignore[arg-type]


async def health_status(client: SGLangClient) -> int | str:
    try:
        return (await client.health()).status
    except errors.ServerUnreachable:
        return "refused"


async def test_health_refused_then_503_then_200_across_a_start(start_sim: StartSim) -> None:
    # A long warm-up makes the 503 window easy to observe; each stage is awaited on the log.
    sim = start_sim("--time-scale", "0.05", "--slow-phase", "warming_up=40", wait=None)
    async with SGLangClient(ServerURL.parse(sim.url)) as client:
        assert await health_status(client) == "refused"
        await asyncio.to_thread(sim.wait_bound, 60)
        assert await health_status(client) == 503
        assert (await client.model_info()).model_path  # info routes answer during warm-up
        await sim.wait_ready_async(timeout=60)
        assert await health_status(client) == 200


async def test_health_503_during_sigterm_drain(start_sim: StartSim) -> None:
    sim = start_sim("--tokens-per-s", "100", "--ttft", "0")
    async with SGLangClient(ServerURL.parse(sim.url)) as client:
        in_flight = asyncio.ensure_future(client.generate(request(120, extra={"ignore_eos": True})))
        await sim.wait_for_line_async(r"Prefill batch", timeout=30)
        mark = sim.mark()
        sim.terminate()
        await sim.wait_for_line_async(r"SIGTERM received", timeout=30, since=mark)
        assert await health_status(client) == 503
        result = await in_flight  # the drain lets it finish
        assert result.finish.kind == "length" and len(result.output_ids) == 120
    assert await sim.wait_exit_async(timeout=30) == 0


@pytest.mark.parametrize(
    ("fault", "kinds"),
    [("error_rate", (errors.ServerBusy, errors.ServerFault)),
     ("reset_rate", (errors.ConnectionLost,)),
     ("garbage_rate", (errors.ProtocolError,))],
)
async def test_injected_faults_are_typed_and_transient(
    sim_server: SimProcess, fault: str, kinds: tuple[type, ...]
) -> None:
    httpx.post(f"{sim_server.url}/sim/faults", json={fault: 1.0}).raise_for_status()
    try:
        async with SGLangClient(ServerURL.parse(sim_server.url)) as client:
            with pytest.raises(kinds) as caught:
                await client.generate(request())
        assert caught.value.retryable
    finally:
        httpx.post(f"{sim_server.url}/sim/faults", json={fault: 0.0}).raise_for_status()


async def test_out_of_vocab_id_takes_the_server_down(start_sim: StartSim) -> None:
    # What the capture's pre-send vocabulary guard exists to prevent (recorded on real SGLang).
    sim = start_sim()
    bad = GenerateRequest(input_ids=[*PROMPT[:-1], kimi.VOCAB_SIZE + 5, kimi.THINK],
                          sampling=SamplingParams(max_new_tokens=4))
    async with SGLangClient(ServerURL.parse(sim.url)) as client:
        with pytest.raises(errors.ConnectionLost):
            await client.generate(bad)
        assert await sim.wait_exit_async(timeout=30) != 0
        assert await health_status(client) == "refused"


async def test_api_key_required(start_sim: StartSim) -> None:
    sim = start_sim("--api-key", "sk-test-key")
    async with SGLangClient(ServerURL.parse(sim.url), api_key="wrong") as client:
        with pytest.raises(errors.Unauthorized):
            await client.generate(request())
        assert (await client.health()).status == 200  # /health is exempt
    async with SGLangClient(ServerURL.parse(sim.url), api_key="sk-test-key") as client:
        assert (await client.generate(request())).output_ids


async def test_incremental_server_streams_the_same_ids(start_sim: StartSim,
                                                       sim_server: SimProcess) -> None:
    incremental = start_sim("--incremental-streaming-output")
    results = []
    for url in (sim_server.url, incremental.url):
        async with SGLangClient(ServerURL.parse(url)) as client:
            plain = await client.generate(request(48))
            streamed = await client.generate_streaming(request(48))
        assert streamed.output_ids == plain.output_ids
        results.append(plain.output_ids)
    assert results[0] == results[1]

"""The client's protocol tests over real sockets.

Each test runs against the simulated server (a separate process) and, when
``EAGLE_REAL_SGLANG_URL`` names a running real SGLang server (for example one
started by scripts/realsglang, see docs/real-sglang.md), against that too.
``EAGLE_REAL_SGLANG_VOCAB`` (default 1024, that script's tiny model) and
``EAGLE_REAL_SGLANG_CONTEXT`` (default 4096) describe that server's model, which its API
does not report.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from eagle_tui.core import errors, kimi
from eagle_tui.core.sglang import GenerateRequest, SamplingParams, SGLangClient, TokenDelta
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.urls import ServerURL

pytestmark = pytest.mark.slow

REAL_URL = os.environ.get("EAGLE_REAL_SGLANG_URL")


@dataclass(frozen=True)
class Peer:
    """A server under test and what the tests need to know about its model."""

    url: str
    prompt: tuple[int, ...]
    context_len: int
    vocab_size: int
    is_real: bool


SIM_PROMPT = (kimi.IM_USER, 1200, 1300, 1400, kimi.IM_END, kimi.IM_ASSISTANT, 1500,
              kimi.IM_MIDDLE, kimi.THINK)
REAL_PROMPT = (1, 936, 201, 958, 954, 2, 201, 1, 300, 85, 927, 201)  # tiny model, "Hello world"


@pytest.fixture(params=["sim", "real"])
def peer(request: pytest.FixtureRequest) -> Peer:
    if request.param == "real":
        if not REAL_URL:
            pytest.skip("set EAGLE_REAL_SGLANG_URL to run against a real SGLang server")
        return Peer(REAL_URL, REAL_PROMPT,
                    int(os.environ.get("EAGLE_REAL_SGLANG_CONTEXT", "4096")),
                    int(os.environ.get("EAGLE_REAL_SGLANG_VOCAB", "1024")), True)
    slow_sim = request.getfixturevalue("slow_sim")
    return Peer(slow_sim.url, SIM_PROMPT, slow_sim_context(), kimi.VOCAB_SIZE, False)


def slow_sim_context() -> int:
    return 8192


@pytest.fixture(scope="module")
def slow_sim() -> Iterator[SimProcess]:
    """A sim fast enough for tests yet slow enough that a request can be caught in flight."""
    args = ["--time-scale", "0", "--tokens-per-s", "400", "--ttft", "0.01",
            "--context-length", str(slow_sim_context())]
    with SimProcess(args) as sim:
        sim.wait_ready(timeout=60)
        yield sim


@pytest.fixture
async def client(peer: Peer) -> AsyncIterator[SGLangClient]:
    async with SGLangClient(ServerURL.parse(peer.url)) as client:
        yield client


def greedy(peer: Peer, max_new_tokens: int = 24, **kwargs: Any) -> GenerateRequest:
    sampling = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0, **kwargs)
    return GenerateRequest(input_ids=peer.prompt, sampling=sampling)


async def test_health_and_info(peer: Peer, client: SGLangClient) -> None:
    assert (await client.health()).status == 200
    info = await client.model_info()
    assert info.model_path
    server = await client.server_info()
    assert server.version is not None
    if not peer.is_real:
        assert server.version == "0.5.23"


async def test_counts_match_ids(peer: Peer, client: SGLangClient) -> None:
    result = await client.generate(greedy(peer))
    assert result.completion_tokens == len(result.output_ids) > 0
    assert result.prompt_tokens == len(peer.prompt)
    assert all(0 <= i < peer.vocab_size for i in result.output_ids)


async def test_stop_token_is_the_last_output_id(peer: Peer, client: SGLangClient) -> None:
    first = await client.generate(greedy(peer))
    stop_id = first.output_ids[2]
    result = await client.generate(greedy(peer, stop_token_ids=(stop_id,)))
    assert result.finish.kind == "stop" and result.finish.matched_token == stop_id
    assert result.output_ids[-1] == stop_id
    assert result.output_ids == first.output_ids[: first.output_ids.index(stop_id) + 1]


async def test_streaming_gives_the_same_ids(peer: Peer, client: SGLangClient) -> None:
    plain = await client.generate(greedy(peer, 32))
    deltas: list[TokenDelta] = []
    streamed = await client.generate_streaming(greedy(peer, 32), deltas.append)
    assert streamed.output_ids == plain.output_ids
    assert tuple(i for d in deltas for i in d.new_ids) == plain.output_ids
    assert streamed.finish == plain.finish


async def test_context_too_long(peer: Peer, client: SGLangClient) -> None:
    too_long = GenerateRequest(input_ids=[peer.prompt[1]] * (peer.context_len + 10),
                               sampling=SamplingParams(max_new_tokens=4))
    with pytest.raises(errors.ContextTooLong) as caught:
        await client.generate(too_long)
    assert not caught.value.retryable


async def test_prompt_plus_max_new_tokens_too_long(peer: Peer, client: SGLangClient) -> None:
    request = GenerateRequest(input_ids=peer.prompt,
                              sampling=SamplingParams(max_new_tokens=peer.context_len))
    with pytest.raises(errors.ContextTooLong):
        await client.generate(request)


@pytest.mark.parametrize(
    ("sampling", "match"),
    [({"temperature": -1.0}, "temperature"), ({"extra": {"foo": 1}}, "foo"),
     ({"top_p": 0.0}, "top_p")],
)
async def test_bad_sampling_is_rejected(peer: Peer, client: SGLangClient,
                                        sampling: dict[str, Any], match: str) -> None:
    request = GenerateRequest(input_ids=peer.prompt,
                              sampling=SamplingParams(max_new_tokens=4, **sampling))
    with pytest.raises(errors.RequestRejected, match=match) as caught:
        await client.generate(request)
    assert not caught.value.retryable


async def test_empty_input_ids_rejected(peer: Peer, client: SGLangClient) -> None:
    with pytest.raises(errors.RequestRejected, match="empty"):
        await client.generate(GenerateRequest(input_ids=[],
                                              sampling=SamplingParams(max_new_tokens=4)))


async def long_stream(client: SGLangClient, peer: Peer, rid: str,
                      on_first: Callable[[], Any], max_new_tokens: int = 3000) -> Any:
    """A streaming request (EOS ignored); ``on_first`` runs at its first token."""
    fired = asyncio.Event()
    tasks: list[asyncio.Task[Any]] = []

    def on_delta(delta: TokenDelta) -> None:
        if not fired.is_set():
            fired.set()
            tasks.append(asyncio.ensure_future(on_first()))

    request = GenerateRequest(
        input_ids=peer.prompt, rid=rid,
        sampling=SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0,
                                extra={"ignore_eos": True}))
    try:
        return await client.generate_streaming(request, on_delta)
    finally:
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_abort_reports_aborted_with_partial_output(peer: Peer, client: SGLangClient) -> None:
    rid = f"eagle-abort-{os.getpid()}-000001"
    with pytest.raises(errors.RequestAborted) as caught:
        await long_stream(client, peer, rid, lambda: client.abort(rid))
    assert caught.value.retryable
    assert caught.value.partial.finish.kind == "abort"
    assert 0 < len(caught.value.partial.output_ids) < 3000


async def test_abort_of_a_mere_prefix_is_ignored(peer: Peer, client: SGLangClient) -> None:
    # SGLang 0.5.23 with one tokenizer worker drops an abort whose rid is not exactly in
    # flight; only then does the scheduler abort every rid starting with it.
    rid = f"eagle-prefix-{os.getpid()}-000001"
    result = await long_stream(client, peer, rid, lambda: client.abort(rid[:-3]),
                               max_new_tokens=120)
    assert result.finish.kind == "length" and len(result.output_ids) == 120


async def test_exact_abort_also_takes_rids_it_prefixes(peer: Peer, client: SGLangClient) -> None:
    # Why capture rids are fixed-width: aborting "...-1" also aborts "...-10".
    short, longer = f"eagle-pfx-{os.getpid()}-1", f"eagle-pfx-{os.getpid()}-10"
    longer_running = asyncio.Event()

    async def mark_running() -> None:
        longer_running.set()

    other = asyncio.ensure_future(long_stream(client, peer, longer, mark_running))
    await longer_running.wait()
    with pytest.raises(errors.RequestAborted):
        await long_stream(client, peer, short, lambda: client.abort(short))
    with pytest.raises(errors.RequestAborted):
        await other

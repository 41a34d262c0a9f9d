"""Issue 39 item 11, the health side: counts that agree with their nouns, no parentheses in
parentheses, a ``/health`` line that says what happened in a few words, and a
``slow_startup`` that does not predict the stall flag raised beside it."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import health_fakes as f
from health_fakes import Driver, alive, chunk

from eagle_tui.core.clock import SystemClock
from eagle_tui.core.health.history import StartupRecord, expectations_from
from eagle_tui.core.health.nextstep import SLOW_STEP
from eagle_tui.core.health.poller import HealthOutcome, HealthPoller
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.sglang.client import SGLangClient
from eagle_tui.core.urls import ServerURL


def _start_to_capture(d: Driver) -> None:
    for lines in ([f.ARGS], f.BEGIN, [f.WEIGHTS_END[0]], [f.WEIGHTS_END[1], *f.KV],
                  f.GRAPH_BEGIN):
        d.tick(chunk(*lines), alive(cpu=50.0))
        d.advance(5)


def test_one_earlier_start_up_reads_in_the_singular_and_a_stall_is_not_predicted(
    tmp_path: Path,
) -> None:
    history = tmp_path / "history.jsonl"
    first = Driver(history=history)
    _start_to_capture(first)
    first.advance(40)
    first.tick(chunk(*f.GRAPH_END, f.LIMITS, *f.UVICORN), alive())
    first.answer(HealthOutcome.OK, 200)
    first.tick(chunk(f.READY), alive())

    second = Driver(history=history)
    second.tick(chunk(f.ARGS), alive())
    _start_to_capture(second)
    second.advance(60)  # slower than the one start-up recorded: slow_startup alone
    slow = second.tick(chunk(), alive()).flag("slow_startup")
    assert slow is not None
    assert "slowest of 1 start-up was" in slow.evidence, slow.evidence
    assert slow.next_step == SLOW_STEP  # nothing stalled yet: the stall may follow
    second.advance(71)  # past the learned silence limit: stalled beside it
    snap = second.tick(chunk(), alive())
    stalled, slow = snap.flag("stalled"), snap.flag("slow_startup")
    assert stalled is not None and slow is not None
    assert "history of 1 start-up)" in stalled.evidence, stalled.evidence
    assert "start-ups" not in stalled.evidence + slow.evidence
    assert "a stall flag follows" not in slow.next_step
    assert "stall flag" in slow.next_step  # it points at the flag that is there


def test_sources_hold_no_parentheses_in_parentheses() -> None:
    settings = WatchSettings()
    default = expectations_from([], settings).expectation.source
    assert default == "default: no earlier start-up"
    record = StartupRecord("sig", 0.0, 100.0, server_timings={"load_weight": 40.0})
    found = expectations_from([record], settings)
    for source in (*found.stall_sources.values(), found.expectation.source):
        assert "(" not in source and "start-ups" not in source, source


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_refused_health_probe_says_so_in_two_words() -> None:
    async def probe() -> str:
        nowhere = ServerURL.parse(f"http://127.0.0.1:{free_port()}")  # nothing listens there
        client = SGLangClient(nowhere)
        try:
            poller = HealthPoller(lambda timeout: client.health(timeout=timeout),
                                  clock=SystemClock())
            return (await poller.poll_once()).describe()
        finally:
            await client.aclose()

    assert asyncio.run(probe()) == "connection refused"

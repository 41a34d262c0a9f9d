"""A router that answers every POST 503 ``no_available_workers`` while its ``/health`` and
``/workers`` say all is well (issue 39 item 18), on real sockets: capture used to re-admit it
at every health check and send a full pool of requests each time (1,089 in 15 s). It backs
off per server like any transient error now: each pause without a success in between holds
the server out twice as long, and then one request goes out on probation."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fakerouter import NoWorkerRouter, Spy
from test_e2e_support import ROOT, cli_env
from test_engine_fakes import write_prompts

from eagle_tui.core.tokenizer import bundled_tokenizer_path

pytestmark = pytest.mark.slow

WINDOW_S = 15.0  # the window
CONCURRENCY = 64  # capture's default


@pytest.fixture
def spy() -> Iterator[Spy]:
    with Spy() as spy:
        yield spy


def attempts_bound(window_s: float, concurrency: int) -> int:
    """The most POSTs the back-off allows in ``window_s``: two full pools (the first
    re-admission and the one after the first pause, which has no hold), then one request
    (probation) per re-admission, each after a hold of 1, 2, 4 … s up to 30 (counted as if
    the health checks that end them took no time, so the bound is generous)."""
    readmissions, elapsed, hold = 0, 0.0, 1.0
    while elapsed <= window_s:
        elapsed += hold
        readmissions += 1
        hold = min(hold * 2, 30.0)
    return 2 * concurrency + readmissions


def test_the_holds_double_up_to_the_retry_policys_longest_wait() -> None:
    from eagle_tui.core.capture.dispatch import ServerPool

    assert attempts_bound(WINDOW_S, CONCURRENCY) == 2 * 64 + 5  # 1+2+4+8 = 15 s, and one
    assert [ServerPool.hold_for(n) for n in range(1, 8)] == [0, 1, 2, 4, 8, 16, 30]
    assert ServerPool.hold_for(10_000) == 30


def test_capture_backs_off_a_router_with_no_worker(tmp_path: Path, spy: Spy) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", 200)
    with NoWorkerRouter([f"{spy.url}/w0"]) as router:
        process = subprocess.Popen(
            [sys.executable, "-m", "eagle_tui.tui.cli", "capture", "--display", "plain",
             "--prompts", str(prompts), "--out", str(tmp_path / "out"),
             "--server", router.url, "--tokenizer", str(bundled_tokenizer_path()),
             "--max-new-tokens", "16", "--concurrency", str(CONCURRENCY)],
            cwd=ROOT, env=cli_env({"EAGLE_TUI_STATE_DIR": str(tmp_path / "state")}),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while not router.posts and time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.05)
            assert router.posts, "capture never sent a request"
            time.sleep(max(0.0, router.posts[0] + WINDOW_S - time.monotonic()))
        finally:
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=120)
        first = router.posts[0]
        sent = sum(1 for at in router.posts if at - first <= WINDOW_S)
    print(f"POSTs to a router answering 503 no_available_workers, {WINDOW_S:g} s, "
          f"--concurrency {CONCURRENCY}: {sent}", file=sys.__stderr__)
    assert "Traceback" not in err, err[-2000:]
    assert spy.seen == []  # the listed worker was never asked
    assert sent <= attempts_bound(WINDOW_S, CONCURRENCY), sent


async def test_a_relapsing_server_is_held_then_on_probation_until_a_success() -> None:
    from support.clock import FakeClock
    from test_dispatch import StubClient, pool_of

    from eagle_tui.core.capture.dispatch import ServerState
    from eagle_tui.core.capture.healthloop import HealthMonitor

    clock = FakeClock()
    pool = pool_of(4, clock=clock, start_paused=True)
    [server] = pool.servers
    stub: StubClient = server.client  # type: ignore[assignment]
    monitor = HealthMonitor(pool, clock)
    assert await monitor.probe(server) and server.state is ServerState.READY
    for _ in range(4):
        await pool.acquire()
    for _ in range(4):  # every request fails: the first pauses it
        pool.release(server, ok=False)
        pool.pause(server, "no_worker: 503")
    assert server.relapses == 1 and "backing off" not in server.reason
    assert await monitor.probe(server) and server.state is ServerState.READY  # no hold yet
    assert not server.probation
    await pool.acquire()
    pool.release(server, ok=False)
    pool.pause(server, "no_worker: 503")
    assert "backing off 1 s (paused 2 times without a success)" in server.reason
    assert await monitor.probe(server) and server.state is ServerState.PAUSED  # held
    clock.advance(1.0)
    assert await monitor.probe(server) and server.state is ServerState.READY
    assert server.probation and stub.status == 200
    first = await pool.acquire()
    assert not server.has_room  # one at a time on probation
    pool.release(first, ok=True)  # it succeeded: the full pool again, the count reset
    assert not server.probation and server.relapses == 0
    assert [await pool.acquire() for _ in range(4)] == [server] * 4

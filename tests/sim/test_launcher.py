"""SimProcess itself: async use, waits that fail fast, kill, cleanup."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import httpx
import pytest

from eagle_tui.core.sim.launcher import SimExited, SimProcess

pytestmark = pytest.mark.slow


async def test_async_use_and_kill() -> None:
    async with SimProcess(["--time-scale", "0", "--tokens-per-s", "0"]) as sim:
        await sim.wait_ready_async(timeout=60)
        async with httpx.AsyncClient() as client:
            assert (await client.get(sim.url + "/health")).status_code == 200
        sim.kill()
        assert await sim.wait_exit_async(timeout=10) == -signal.SIGKILL
    assert not Path(sim.log_path).exists()  # our own temporary log is removed


def test_waiting_on_a_dead_process_fails_at_once() -> None:
    with SimProcess(["--time-scale", "0", "--crash-at", "launching"]) as sim, \
            pytest.raises(SimExited, match="RuntimeError"):
        sim.wait_ready(timeout=60)


def test_a_bad_model_path_is_reported(tmp_path: Path) -> None:
    with SimProcess(["--model-path", str(tmp_path)]) as sim:
        assert sim.wait_exit(timeout=30) == 2
        assert "no tokenizer.json in" in sim.log_text()


def test_a_port_taken_before_the_sim_binds_it_is_replaced_by_another() -> None:
    """Another process takes the free port between our probe and the sim's bind (many sims
    and test workers start at once): the sim starts again on a new port."""
    sim = SimProcess(["--time-scale", "0", "--tokens-per-s", "0"])
    chosen = sim.port
    with socket.socket() as thief:
        thief.bind(("127.0.0.1", chosen))
        thief.listen()
        with sim:
            sim.wait_ready(timeout=60)
            assert sim.port != chosen
            assert httpx.get(sim.url + "/health", timeout=10).status_code == 200


def test_a_given_port_in_use_still_fails_with_the_bind_error() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with SimProcess(["--time-scale", "0"], port=port) as sim, \
                pytest.raises(SimExited, match="Errno 98"):
            sim.wait_ready(timeout=60)

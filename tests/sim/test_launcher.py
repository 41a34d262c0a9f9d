"""SimProcess itself: async use, waits that fail fast, kill, cleanup."""

from __future__ import annotations

import signal
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

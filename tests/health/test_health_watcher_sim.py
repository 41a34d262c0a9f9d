"""The watcher against the simulated SGLang server running as a real process.

Where time matters (slow start, stall) the watcher runs on a ``FakeClock``: the test waits
for the evidence in the sim's log (an event), then moves the watcher's clock past the
limit and checks the verdict arrives within a tick or two. Elsewhere the watcher ticks on
demand right after the evidence exists, and the test counts the ticks it needed.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.clock import FakeClock

from eagle_tui.core.clock import Clock, SystemClock
from eagle_tui.core.health.assemble import WatchOptions, build_watcher
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import HealthSnapshot, Outcome
from eagle_tui.core.health.watcher import Watcher
from eagle_tui.core.proc.launcher import ManagedServer
from eagle_tui.core.proc.stop import StopTimeouts
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.urls import ServerURL

pytestmark = pytest.mark.slow

StartSim = Callable[..., SimProcess]
QUICK = ("--time-scale", "0.05", "--tp-size", "2", "--health-latency", "0")
FAST_SETTINGS = WatchSettings(poll_interval_s=0.05, health_timeout_s=1.0)


def watcher_for(
    sim: SimProcess,
    tmp_path: Path,
    *,
    clock: Clock | None = None,
    settings: WatchSettings = FAST_SETTINGS,
    **options: Any,
) -> Watcher:
    opts = WatchOptions(
        url=ServerURL.parse(sim.url),
        log_path=options.pop("log_path", sim.log_path),
        pid=options.pop("pid", sim.pid),
        settings=settings,
        history_path=tmp_path / "history.jsonl",
        gpu=False,
        **options,
    )
    return build_watcher(opts, clock=clock or SystemClock())


async def ticks_until(
    watcher: Watcher, done: Callable[[HealthSnapshot], bool], limit: int = 3
) -> tuple[HealthSnapshot, int]:
    """Tick (waiting for each /health probe) until ``done``; how many ticks it took."""
    for count in range(1, limit + 1):
        if isinstance(watcher.clock, FakeClock):
            watcher.clock.advance(watcher.settings.poll_interval_s)
        snapshot = await watcher.tick(await_health=True)
        if done(snapshot):
            return snapshot, count
    raise AssertionError(f"not done after {limit} ticks: {snapshot.phase} {snapshot.flags}")


def has_verdict(snapshot: HealthSnapshot) -> bool:
    return snapshot.verdict is not None


async def run_to_verdict(watcher: Watcher, timeout: float = 30.0) -> list[HealthSnapshot]:
    seen: list[HealthSnapshot] = []
    import asyncio

    await asyncio.wait_for(watcher.run(seen.append, until=has_verdict), timeout)
    return seen


async def test_normal_start_phase_sequence_with_shard_percent_tracking_the_log(
    start_sim: StartSim, tmp_path: Path
) -> None:
    sim = start_sim(*QUICK, "--slow-phase", "loading_weights=4", wait=None)
    watcher = watcher_for(sim, tmp_path)
    try:
        seen = await run_to_verdict(watcher)
    finally:
        await watcher.aclose()
    final = seen[-1]
    assert final.phase == Phase.READY and final.verdict is not None
    assert final.verdict.outcome == Outcome.READY
    order = [p for p in watcher.state.phase_starts() if p != Phase.READY]
    assert order == [
        Phase.LAUNCHING,
        Phase.DISTRIBUTED_INIT,  # "Init parallel begin" (a phase of its own since issue 10)
        Phase.LOADING_WEIGHTS,
        Phase.ALLOCATING_KV,
        Phase.CAPTURING_GRAPHS,
        Phase.WARMING_UP,
    ]
    shown = [s.progress.shards_done for s in seen if s.progress.shards_done is not None]
    assert shown == sorted(shown) and len(set(shown)) >= 4 and shown[-1] == 64
    assert final.progress.kv_tokens and final.progress.max_total_num_tokens
    assert final.process is not None and final.process.pid == sim.pid
    assert final.port is not None and final.port.held_by_server is True
    assert final.flags == ()
    assert watcher.state.recorded is not None  # the start-up went into history


async def test_expected_window_learned_from_history_is_used_on_the_next_start(
    start_sim: StartSim, tmp_path: Path
) -> None:
    first = start_sim(*QUICK, wait=None)
    watcher = watcher_for(first, tmp_path)
    try:
        await run_to_verdict(watcher)
    finally:
        await watcher.aclose()
    record = watcher.state.recorded
    assert record is not None
    first.close()
    second = start_sim(*QUICK, "--slow-phase", "loading_weights=100", wait=None)
    clock = FakeClock(wall_start=time.time())
    watcher = watcher_for(second, tmp_path, clock=clock)
    try:
        await second.wait_for_line_async("Load weight begin", timeout=30)
        snapshot, _ = await ticks_until(watcher, lambda s: s.signature is not None)
        assert snapshot.expected.window_s == pytest.approx(record.total_s * 1.25, abs=0.01)
        assert "history" in snapshot.expected.source
        clock.advance(record.total_s * 1.25 + 1)
        snapshot, ticks = await ticks_until(watcher, lambda s: s.flag("slow_startup") is not None)
        assert ticks == 1
    finally:
        await watcher.aclose()


async def test_slow_start_past_the_expected_window(start_sim: StartSim, tmp_path: Path) -> None:
    sim = start_sim(*QUICK, "--slow-phase", "loading_weights=200", wait=None)
    clock = FakeClock(wall_start=time.time())
    calm = WatchSettings(
        poll_interval_s=1.0, default_window_s=600.0, stall_limits_s=dict.fromkeys(Phase, 10_000.0)
    )
    watcher = watcher_for(sim, tmp_path, clock=clock, settings=calm)
    try:
        await sim.wait_for_line_async("Load weight begin", timeout=30)
        snapshot, _ = await ticks_until(watcher, lambda s: s.phase == Phase.LOADING_WEIGHTS)
        assert snapshot.flag("slow_startup") is None
        clock.advance(600)
        snapshot, ticks = await ticks_until(watcher, lambda s: s.flag("slow_startup") is not None)
        assert ticks == 1
        slow = snapshot.flag("slow_startup")
        assert slow is not None and "expected within 10m00s" in slow.evidence
        assert "now in loading_weights" in slow.evidence
        assert snapshot.verdict is None  # slow is a warning, not a verdict
    finally:
        await watcher.aclose()


async def test_stall_in_cuda_graph_capture_with_the_process_alive(
    start_sim: StartSim, tmp_path: Path
) -> None:
    sim = start_sim(*QUICK, "--stall-at", "capturing_graphs", wait=None)
    clock = FakeClock(wall_start=time.time())
    watcher = watcher_for(sim, tmp_path, clock=clock, settings=WatchSettings(poll_interval_s=1.0))
    try:
        await sim.wait_for_line_async(r"Capturing batches .* 17/36", timeout=30)
        snapshot, _ = await ticks_until(watcher, lambda s: s.phase == Phase.CAPTURING_GRAPHS)
        assert snapshot.progress.graph_percent is not None
        clock.advance(300)
        snapshot, ticks = await ticks_until(watcher, has_verdict)
        assert ticks == 1
        assert snapshot.verdict is not None and snapshot.verdict.outcome == Outcome.STALLED
        stalled = snapshot.flag("stalled")
        assert stalled is not None
        # Since issue 10 a moving capture bar sets the limit: 3x its slowest step, >= 55 s.
        assert "in capturing_graphs (limit 55s, 3 x the slowest capture step" in stalled.evidence
        assert "Capturing batches" in stalled.evidence
        assert stalled.cause == "hung" and snapshot.verdict.cause == "hung"
        assert f"(PID {sim.pid}) sleeping" in stalled.evidence
        assert "stacks 0s ago:" in stalled.evidence
        assert sim.returncode is None
    finally:
        await watcher.aclose()


async def test_crash_with_an_oom_line(start_sim: StartSim, tmp_path: Path) -> None:
    sim = start_sim(*QUICK, "--fatal", "oom", wait=None)
    watcher = watcher_for(sim, tmp_path)
    try:
        await sim.wait_exit_async(timeout=30)
        snapshot, _ = await ticks_until(watcher, has_verdict, limit=2)
        assert snapshot.phase == Phase.CRASHED
        assert snapshot.verdict is not None and snapshot.verdict.outcome == Outcome.CRASHED
        assert "fatal:oom" in snapshot.verdict.diagnosis
        assert "CUDA out of memory" in snapshot.verdict.diagnosis
        assert snapshot.flag_names[0] == "fatal:oom"
    finally:
        await watcher.aclose()


async def test_silent_death_by_sigkill(start_sim: StartSim, tmp_path: Path) -> None:
    sim = start_sim(*QUICK, "--slow-phase", "loading_weights=200", wait=None)
    watcher = watcher_for(sim, tmp_path)
    try:
        await sim.wait_for_line_async("Load weight begin", timeout=30)
        await ticks_until(watcher, lambda s: s.phase == Phase.LOADING_WEIGHTS)
        sim.kill()
        await sim.wait_exit_async()
        snapshot, _ = await ticks_until(watcher, has_verdict, limit=1)
        assert snapshot.verdict is not None and snapshot.verdict.outcome == Outcome.CRASHED
        assert "silent exit" in snapshot.verdict.diagnosis
        exited = snapshot.flag("process_exited")
        assert exited is not None and f"PID {sim.pid}" in exited.evidence
        assert "no fatal line in the log" in exited.evidence
        assert "Multi-thread loading shards" in exited.evidence  # the last line it wrote
    finally:
        await watcher.aclose()


async def test_old_server_still_holding_the_port_when_the_new_one_starts(
    start_sim: StartSim, tmp_path: Path
) -> None:
    old = start_sim(*QUICK)
    new = SimProcess([*QUICK, "--slow-phase", "loading_weights=200"], port=old.port).start()
    try:
        settings = WatchSettings(poll_interval_s=0.05, port_conflict_grace_s=0.0)
        watcher = watcher_for(new, tmp_path, settings=settings)
        try:
            await new.wait_for_line_async("server_args=", timeout=30)
            snapshot, _ = await ticks_until(watcher, has_verdict, limit=2)
            assert snapshot.verdict is not None
            assert snapshot.verdict.outcome == Outcome.PORT_CONFLICT
            assert f"held by PID {old.pid}" in snapshot.verdict.diagnosis
            assert snapshot.phase != Phase.READY  # the old server's /health 200 is not ours
        finally:
            await watcher.aclose()
    finally:
        new.close()


async def test_fatal_address_in_use_at_bind_time(start_sim: StartSim, tmp_path: Path) -> None:
    sim = start_sim(*QUICK, "--fatal", "address-in-use", wait=None)
    watcher = watcher_for(sim, tmp_path)
    try:
        await sim.wait_exit_async(timeout=30)
        snapshot, _ = await ticks_until(watcher, has_verdict, limit=2)
        assert snapshot.verdict is not None
        assert snapshot.verdict.outcome == Outcome.PORT_CONFLICT
        assert "address already in use" in snapshot.verdict.diagnosis
    finally:
        await watcher.aclose()


async def test_sigterm_drain_is_stopping_then_down(start_sim: StartSim, tmp_path: Path) -> None:
    sim = start_sim(*QUICK)
    watcher = watcher_for(sim, tmp_path)
    try:
        await ticks_until(watcher, lambda s: s.phase == Phase.READY)
        sim.terminate()
        await sim.wait_for_line_async("SIGTERM received", timeout=10)
        snapshot, _ = await ticks_until(watcher, lambda s: s.phase != Phase.READY, limit=2)
        assert snapshot.phase in (Phase.STOPPING, Phase.DOWN)
        assert snapshot.verdict is not None and snapshot.verdict.outcome == Outcome.STOPPED
        assert "SIGTERM received" in snapshot.verdict.diagnosis
        await sim.wait_exit_async()
        snapshot, _ = await ticks_until(watcher, lambda s: s.phase == Phase.DOWN, limit=1)
        assert snapshot.verdict is not None and snapshot.verdict.outcome == Outcome.STOPPED
    finally:
        await watcher.aclose()


async def test_ready_then_hung_then_dead_is_degraded_then_crashed(
    start_sim: StartSim, tmp_path: Path
) -> None:
    sim = start_sim(*QUICK)
    settings = WatchSettings(poll_interval_s=0.05, health_timeout_s=0.2)
    watcher = watcher_for(sim, tmp_path, settings=settings)
    try:
        await ticks_until(watcher, lambda s: s.phase == Phase.READY)
        os.kill(sim.pid, signal.SIGSTOP)  # hung: alive, silent, /health times out
        snapshot, _ = await ticks_until(watcher, lambda s: s.phase == Phase.DEGRADED, limit=3)
        degraded = snapshot.flag("degraded")
        assert degraded is not None and "timeout" in degraded.evidence
        assert f"process {sim.pid} alive (state stopped)" in degraded.evidence
        sim.kill()
        await sim.wait_exit_async()
        snapshot, _ = await ticks_until(watcher, lambda s: s.phase == Phase.CRASHED, limit=1)
        assert snapshot.verdict is not None and snapshot.verdict.outcome == Outcome.CRASHED
    finally:
        await watcher.aclose()


async def test_managed_restart_rotates_the_log_and_the_watch_follows_the_new_start(
    tmp_path: Path,
) -> None:
    from eagle_tui.core.sim.launcher import free_port

    port = free_port()
    log = tmp_path / "server.log"
    argv = ["python", "-m", "eagle_tui.core.sim", *QUICK, "--port", str(port), "--time-scale", "0"]
    argv[0] = __import__("sys").executable
    server = ManagedServer(argv, log_path=log, port=port)
    clock = SystemClock()
    server.start()
    opts = WatchOptions(
        url=ServerURL("http", "127.0.0.1", port),
        log_path=log,
        settings=FAST_SETTINGS,
        history_path=tmp_path / "h.jsonl",
        gpu=False,
    )
    watcher = build_watcher(opts, clock=clock, managed=server, launched_at=clock.monotonic())
    try:
        seen = await run_to_verdict(watcher)
        assert seen[-1].phase == Phase.READY
        old_pid = server.pid
        result = await watcher.restart_managed(server, StopTimeouts(term_s=10, kill_s=5))
        assert watcher.latest is not None and watcher.latest.phase == Phase.DOWN  # not crashed
        assert result.started and result.stop is not None and result.stop.clear
        assert result.pid != old_pid
        assert "SIGTERM received" in (tmp_path / "server.log.prev").read_text()
        restart = await run_to_verdict(watcher)
        assert restart[-1].phase == Phase.READY
        assert restart[-1].process is not None and restart[-1].process.pid == result.pid
        # The sim logs "Init parallel begin": distributed init is a phase since issue 10.
        assert list(watcher.state.phase_starts())[:3] == [
            Phase.LAUNCHING,
            Phase.DISTRIBUTED_INIT,
            Phase.LOADING_WEIGHTS,
        ]
    finally:
        await watcher.aclose()
        await server.stop(StopTimeouts(term_s=10, kill_s=5, release_s=5))


async def test_the_loop_survives_garbage_vanished_processes_and_unreadable_logs(
    start_sim: StartSim, tmp_path: Path
) -> None:
    sim = start_sim(*QUICK, "--garbage-rate", "1.0")
    (tmp_path / "log-is-a-dir").mkdir()
    watcher = watcher_for(sim, tmp_path, log_path=tmp_path / "log-is-a-dir", pid=2**22 + 3)
    try:
        snapshot = await watcher.tick(await_health=True)
        assert any("cannot read" in p for p in snapshot.problems)
        assert snapshot.process is not None and snapshot.process.status == "not-found"
        assert snapshot.phase == Phase.CRASHED
    finally:
        await watcher.aclose()


async def test_a_sim_start_leaves_no_line_unrecognised(start_sim: StartSim, tmp_path: Path) -> None:
    """Issue 20: every sim card said `2 log lines not recognised` (uvicorn's `Waiting for
    application startup.`, SGLang's `Engine startup timings (s): …`): lines every start
    prints are read, not counted as unknown."""
    sim = start_sim(*QUICK, wait=None)
    watcher = watcher_for(sim, tmp_path)
    try:
        final = (await run_to_verdict(watcher))[-1]
    finally:
        await watcher.aclose()
    assert final.phase == Phase.READY
    assert (final.unknown_lines, final.unknown_samples) == (0, ())


async def test_after_a_port_conflict_crash_the_holder_is_named_not_adopted(
        start_sim: StartSim, tmp_path: Path) -> None:
    """Issue 20 item 7: the card of a server that died of "address already in use" took the
    port's holder (another server, started earlier) as its process, `/health 200` and all,
    and stopped naming it as the holder."""
    holder = start_sim(*QUICK)
    second = SimProcess([*QUICK], port=holder.port).start()  # the same port: it cannot bind
    try:
        watcher = watcher_for(second, tmp_path, pid=None)  # discovered by port, as --url alone
        try:
            first = await watcher.tick(await_health=True)
            assert first.process is not None and first.process.pid == second.pid
            await second.wait_exit_async(timeout=60)
            seen = []
            for _ in range(6):
                seen.append(await watcher.tick(await_health=True))
        finally:
            await watcher.aclose()
    finally:
        second.close()
    assert all(s.process is not None and s.process.pid == second.pid for s in seen)
    assert not seen[-1].process.alive  # type: ignore[union-attr]
    final = seen[-1]
    assert final.port is not None and final.port.held_by_server is False
    assert final.port.holder_pid == holder.pid
    assert final.verdict is not None and final.verdict.outcome == Outcome.PORT_CONFLICT
    assert f"PID {holder.pid}" in final.verdict.diagnosis + final.verdict.next_step

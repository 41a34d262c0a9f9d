"""Verdicts from the processes on the simulated server, whose ranks really hang (issue 19).

Each start-up is a real process tree: ``--rank-hang fifo|stop|peers`` and ``--jit-compile S``
start a rank titled ``sglang::scheduler_TP0`` that blocks opening a named pipe, stops itself,
hosts a rendezvous store nobody else joins, or runs a compiler child (``cc1plus``) burning a
core. The watcher is the one ``eagle-tui watch`` builds, sampling the tree and taking py-spy
stacks; the windows are short settings (seconds), not the defaults' minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import time
from pathlib import Path

import pytest
from support.waiting import wait_until

from eagle_tui.core.health.assemble import WatchOptions, build_watcher
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import HealthSnapshot, Outcome
from eagle_tui.core.health.watcher import Watcher
from eagle_tui.core.proc.orphans import OrphanReport, find_orphans, stop_orphans
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.urls import ServerURL

pytestmark = pytest.mark.slow

QUICK = ("--time-scale", "0.05", "--tp-size", "2", "--health-latency", "0")
SHORT = WatchSettings(poll_interval_s=0.25, health_timeout_s=1.0, evidence_after_s=3.0,
                      stopped_after_s=1.0)


def _watcher(sim: SimProcess, tmp_path: Path, settings: WatchSettings = SHORT) -> Watcher:
    options = WatchOptions(url=ServerURL.parse(sim.url), log_path=sim.log_path, pid=sim.pid,
                           settings=settings, history_path=tmp_path / "history.jsonl", gpu=False)
    return build_watcher(options)


async def _to_verdict(watcher: Watcher, timeout: float = 60.0) -> list[HealthSnapshot]:
    seen: list[HealthSnapshot] = []
    await asyncio.wait_for(watcher.run(seen.append, until=lambda s: s.verdict is not None),
                           timeout)
    return seen


async def _verdict_of(sim: SimProcess, tmp_path: Path) -> list[HealthSnapshot]:
    """Watch ``sim`` with the short settings until a verdict; every snapshot seen."""
    watcher = _watcher(sim, tmp_path)
    try:
        return await _to_verdict(watcher)
    finally:
        await watcher.aclose()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_rank_opening_a_named_pipe_is_blocked_on_io_naming_the_file(
    start_sim, tmp_path: Path
) -> None:
    sim = start_sim(*QUICK, "--rank-hang", "fifo", wait=None)
    seen = await _verdict_of(sim, tmp_path)
    final = seen[-1]
    verdict = final.verdict
    assert verdict is not None and verdict.outcome == Outcome.STALLED
    assert verdict.cause == "blocked on I/O" and final.phase == Phase.LOADING_WEIGHTS
    assert verdict.diagnosis.startswith("blocked on I/O: model.safetensors: TP0 (PID ")
    assert "opening a FIFO that no process writes (wait_for_partner)" in verdict.diagnosis
    assert final.stacks is not None and "stacks 0s ago: TP0 in" in verdict.diagnosis
    assert final.last_log_age_s is not None and final.last_log_age_s < 3.0 + 5.0


async def test_a_rank_that_stops_itself_is_stopped_naming_it(start_sim, tmp_path: Path) -> None:
    sim = start_sim(*QUICK, "--rank-hang", "stop", wait=None)
    seen = await _verdict_of(sim, tmp_path)
    verdict = seen[-1].verdict
    assert verdict is not None and verdict.cause == "stopped"
    assert verdict.diagnosis.startswith("stopped: TP0 (PID ")
    assert "stopped by a signal for " in verdict.diagnosis
    assert "kill -CONT" in verdict.next_step
    stacks = seen[-1].stacks
    assert stacks is not None and stacks.folds and stacks.folds[0].labels == "TP0"
    # it sent itself SIGSTOP: the call it sits in is named, not "syscall 62"
    evidence = seen[-1].evidence
    assert evidence is not None and "blocked in kill: stopped by a signal" in "\n".join(
        evidence.describe())


async def test_node_zero_without_node_one_is_waiting_for_peers(start_sim, tmp_path: Path) -> None:
    address = f"127.0.0.1:{_free_port()}"
    sim = start_sim(*QUICK, "--rank-hang", "peers", "--dist-init-addr", address, "--nnodes", "2",
                    wait=None)
    seen = await _verdict_of(sim, tmp_path)
    verdict = seen[-1].verdict
    assert verdict is not None and verdict.cause == "waiting for peers"
    assert (f"waiting for peers: distributed init {address}: this node hosts the store; "
            "1 of 2 ranks connected; missing node 1 (rank 1)") in verdict.diagnosis
    assert seen[-1].phase in (Phase.LAUNCHING, Phase.DISTRIBUTED_INIT)


async def test_waiting_for_peers_counts_the_ranks_the_log_gives_not_the_command_line(
    start_sim, tmp_path: Path
) -> None:
    """The sim's ``--tp-size`` defaults to 8 and is then not on its command line, where
    SGLang's default would be 1: the ``server_args`` line says 8 ranks, 4 per node. Read
    from the command line alone, 1 of 1 ranks had joined and the verdict was "hung"."""
    address = f"127.0.0.1:{_free_port()}"
    sim = start_sim("--time-scale", "0.05", "--health-latency", "0", "--rank-hang", "peers",
                    "--dist-init-addr", address, "--nnodes", "2", wait=None)
    verdict = (await _verdict_of(sim, tmp_path))[-1].verdict
    assert verdict is not None and verdict.cause == "waiting for peers", verdict
    assert (f"distributed init {address}: this node hosts the store; 1 of 8 ranks connected; "
            "missing node 1 (ranks 4-7)") in verdict.diagnosis


async def test_a_compiler_child_keeps_the_start_up_busy_then_it_hangs(
    start_sim, tmp_path: Path
) -> None:
    """4 s of compiling against a 1.5 s limit: busy (no stall) while cc1plus burns, then
    hung once it is gone and the capture stalls."""
    sim = start_sim(*QUICK, "--jit-compile", "4", "--stall-at", "capturing_graphs", wait=None)
    settings = WatchSettings(poll_interval_s=0.25, health_timeout_s=1.0,
                             stall_limits_s={Phase.CAPTURING_GRAPHS: 1.5})
    watcher = _watcher(sim, tmp_path, settings)
    try:
        seen = await _to_verdict(watcher, timeout=90)
    finally:
        await watcher.aclose()
    compiling = [s for s in seen if s.evidence is not None and s.evidence.compilers]
    assert compiling, "the compiler child was never seen"
    assert all(s.flag("stalled") is None for s in compiling)
    busy = [s.busy for s in compiling if s.busy is not None]
    assert busy and "compiling: cc1plus (PID " in busy[-1].evidence  # type: ignore[union-attr]
    ended = max(s.at for s in compiling)
    final = seen[-1]
    assert final.verdict is not None and final.verdict.cause == "hung"
    assert final.at - ended < 1.5 + 5.0  # the limit, the bar's last lines, a few ticks
    assert "every process quiet" in final.verdict.diagnosis


async def test_a_plain_start_with_evidence_is_ready_and_flagless(start_sim, tmp_path: Path) -> None:
    sim = start_sim(*QUICK, "--jit-compile", "0.5", wait=None)
    watcher = _watcher(sim, tmp_path)
    started = time.monotonic()
    try:
        seen = await _to_verdict(watcher)
    finally:
        await watcher.aclose()
    assert seen[-1].verdict is not None and seen[-1].verdict.outcome == Outcome.READY
    assert not [f for s in seen for f in s.flags]
    assert any(s.evidence is not None and s.evidence.processes for s in seen)
    assert time.monotonic() - started < 60


async def test_a_leftover_of_an_earlier_run_is_named_as_the_port_conflicts_cause(
    start_sim, tmp_path: Path
) -> None:
    """The first sim leaves a child that outlives it and then holds its port (as a scheduler
    whose launcher was killed does); the next start on that port fails, and the verdict names
    the leftover and the command that stops it."""
    first = start_sim(*QUICK, "--leave-orphan", "60", wait="bound")
    line = next(x for x in first.log_lines() if "will outlive this server: PID" in x)
    orphan_pid = int(line.rsplit("PID ", 1)[1])
    try:
        first.kill()
        wait_until(lambda: _listening(first.port), timeout=30, what="the leftover holding the port")
        found = find_orphans()
        assert orphan_pid in {o.pid for o in found.orphans}
        second = SimProcess(list(QUICK), port=first.port).start()
        watcher = _watcher(second, tmp_path)
        try:
            seen = await _to_verdict(watcher)
        finally:
            await watcher.aclose()
            second.close()
        verdict = seen[-1].verdict
        assert verdict is not None and verdict.outcome == Outcome.PORT_CONFLICT, verdict
        assert f"PID {orphan_pid} sglang::scheduler_TP1" in verdict.diagnosis
        assert "its launcher is gone" in verdict.diagnosis
        assert f"holds the watched server's port {first.port}" in verdict.diagnosis
        # other engineers' leftovers may be listed too: ours is among the PIDs killed
        assert "stop your leftovers: " in verdict.next_step
        assert re.search(rf"(/proc/|\b){orphan_pid}(/stat|:\d+)", verdict.next_step)
        report = seen[-1].orphans
        assert report is not None
        said = stop_orphans(OrphanReport(tuple(o for o in report.orphans if o.pid == orphan_pid)),
                            grace_s=5)
        assert said == [f"PID {orphan_pid}: stopped"]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(orphan_pid, signal.SIGKILL)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0

"""The watcher's state machine, tick by tick, with hand-moved time and made-up sources."""

from __future__ import annotations

import os
from pathlib import Path

import health_fakes as f
import pytest
from health_fakes import Driver, alive, chunk, gone

from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.poller import HealthOutcome
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import Outcome
from eagle_tui.core.proc.orphans import Orphan, OrphanReport
from eagle_tui.core.proc.report import ChildInfo, GpuDevice, GpuProcess, GpuReport, PortStatus

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "realsrv"  # recorded from real SGLang
REAL_LOG = SAMPLES / "server_startup.log"


def _start_to_capture(d: Driver, probe_cpu: float = 50.0) -> None:
    """Drive a normal start-up up to "Capture … CUDA graph begin", a few seconds per step."""
    steps = [
        [f.ARGS],
        f.BEGIN,
        [f.WEIGHTS_END[0]],  # rank 0 only, for now
        [f.WEIGHTS_END[1], *f.KV],
        f.GRAPH_BEGIN,
    ]
    for lines in steps:
        d.tick(chunk(*lines), alive(cpu=probe_cpu))
        d.advance(5)


def test_normal_start_goes_through_every_phase_with_shard_percent_tracking_the_log() -> None:
    d = Driver()
    d.answer(HealthOutcome.REFUSED)
    assert d.tick(chunk(), alive()).phase == Phase.LAUNCHING
    d.tick(chunk(f.ARGS, *f.BEGIN), alive())
    for done in (0, 16, 32, 64):
        d.advance(3)
        bar = f.SHARD.format(pct=done * 100 // 64, done=done)
        snap = d.tick(chunk(partial=bar), alive())
        assert (snap.progress.shards_done, snap.progress.shards_total) == (done, 64)
        assert snap.progress.shards_percent == done * 100 // 64
        assert snap.last_log_line == bar
    d.tick(chunk(*f.WEIGHTS_END, *f.KV), alive())
    d.advance(2)
    snap = d.tick(chunk(*f.GRAPH_BEGIN, partial=f.GRAPH_BAR.format(bs=64, pct=30)), alive())
    assert (snap.progress.kv_tokens, snap.progress.graph_percent) == (800000, 30)
    d.tick(chunk(*f.GRAPH_END, f.LIMITS, *f.UVICORN), alive())
    d.answer(HealthOutcome.UNHEALTHY, 503)
    d.advance(1)
    assert d.tick(chunk(), alive()).phase == Phase.WARMING_UP
    d.answer(HealthOutcome.OK, 200, latency=1.0)
    d.advance(1)
    snap = d.tick(chunk(f.READY), alive())
    assert d.phases() == [
        "launching",
        "loading_weights",
        "allocating_kv",
        "capturing_graphs",
        "warming_up",
        "ready",
    ]
    assert snap.verdict is not None and snap.verdict.outcome == Outcome.READY
    assert "/health 200" in snap.verdict.diagnosis
    assert snap.progress.max_total_num_tokens == 800000
    assert snap.flags == ()
    assert dict(snap.phase_durations)[Phase.LOADING_WEIGHTS] == pytest.approx(12.0)


def test_recorded_real_log_phase_sequence() -> None:
    if not REAL_LOG.exists():
        pytest.skip("recorded samples not present")
    d = Driver()
    d.answer(HealthOutcome.REFUSED)
    for line in REAL_LOG.read_text().splitlines():
        d.advance(0.1)
        d.tick(chunk(line), alive())
    # "Init parallel begin." is distributed init, a phase of its own since issue 10.
    assert d.phases() == [
        "launching",
        "distributed_init",
        "loading_weights",
        "allocating_kv",
        "warming_up",
        "ready",
    ]
    assert d.snapshots[-1].progress.graphs_disabled


def test_slow_start_past_the_expected_window_is_flagged_but_not_final() -> None:
    d = Driver(settings=WatchSettings(default_window_s=600.0))
    d.tick(chunk(f.ARGS, *f.BEGIN), alive())
    for done in range(1, 64):
        d.advance(10)  # 640 s of steady, slow progress
        snap = d.tick(chunk(partial=f.SHARD.format(pct=done * 100 // 64, done=done)), alive())
    slow = snap.flag("slow_startup")
    assert slow is not None
    assert "expected within 10m00s" in slow.evidence and "default" in slow.evidence
    assert snap.flag("stalled") is None
    assert snap.verdict is None
    assert snap.window_fraction is not None and snap.window_fraction > 1.0


def test_stall_in_graph_capture_names_the_silence_the_last_line_and_the_process() -> None:
    d = Driver()
    _start_to_capture(d, probe_cpu=100.0)
    # Since issue 10 the limit is the step's (graph capture with no bar yet: 10 min), not 5 min.
    d.advance(594)
    assert d.tick(chunk(), alive(cpu=100.0)).flag("stalled") is None
    d.advance(2)
    snap = d.tick(chunk(), alive(cpu=100.0))
    stalled = snap.flag("stalled")
    assert stalled is not None
    assert (
        "no log progress for 10m01s in capturing_graphs (limit 10m00s, default while capturing "
        "graphs (no progress bar yet))" in stalled.evidence
    )
    assert "Capture target decode CUDA graph begin" in stalled.evidence
    assert "process 100 alive, CPU 100%" in stalled.evidence
    assert snap.verdict is not None and snap.verdict.outcome == Outcome.STALLED
    assert snap.phase == Phase.CAPTURING_GRAPHS


def test_stall_evidence_names_the_ranks_that_fell_behind() -> None:
    d = Driver()
    d.tick(chunk(f.ARGS, *f.BEGIN, f.WEIGHTS_END[0], f.KV[0], f.GRAPH_BEGIN[0]), alive())
    d.advance(601)  # past the step's limit (10 min in capture before any bar, since issue 10)
    snap = d.tick(chunk(), alive())
    stalled = snap.flag("stalled")
    assert stalled is not None and "ranks behind: TP1 at loading_weights" in stalled.evidence
    assert dict(snap.ranks) == {"TP0": Phase.CAPTURING_GRAPHS, "TP1": Phase.LOADING_WEIGHTS}


def test_crash_with_an_oom_line_quotes_the_most_specific_line() -> None:
    d = Driver()
    _start_to_capture(d)
    snap = d.tick(chunk(f.SCHED_EXC, '  File "x.py", line 1', f.OOM), alive())
    assert snap.phase == Phase.CRASHED
    assert snap.flag_names[:2] == ("fatal:oom", "fatal:scheduler_exception")
    assert snap.verdict is None  # since issue 10 the verdict waits for the traceback to end
    d.advance(5)
    snap = d.tick(chunk(), alive())
    assert snap.verdict is not None and snap.verdict.outcome == Outcome.CRASHED
    assert "fatal:oom" in snap.verdict.diagnosis and "CUDA out of memory" in snap.verdict.diagnosis


def test_silent_death_names_the_exit_and_the_last_line() -> None:
    d = Driver()
    _start_to_capture(d)
    d.advance(7)
    snap = d.tick(chunk(), gone(code=-9))
    assert snap.phase == Phase.CRASHED
    exited = snap.flag("process_exited")
    assert exited is not None
    assert "PID 100 killed by SIGKILL (-9)" in exited.evidence
    assert "no fatal line in the log" in exited.evidence
    assert "last log line 12s ago" in exited.evidence
    assert snap.verdict is not None and "silent exit" in snap.verdict.diagnosis


def test_old_server_holding_the_port_is_flagged_at_once_and_judged_after_the_grace() -> None:
    d = Driver(settings=WatchSettings(port_conflict_grace_s=15.0))
    old = PortStatus(
        30000,
        True,
        999,
        "python",
        "python -m sglang.launch_server --port 30000",
        held_by_server=False,
    )
    d.answer(HealthOutcome.OK, 200)  # the old server answers, happily
    snap = d.tick(chunk(f.ARGS, *f.BEGIN), alive(port=old))
    conflict = snap.flag("port_conflict")
    assert conflict is not None and "held by PID 999" in conflict.evidence
    assert "not by the server (PID 100)" in conflict.evidence
    assert snap.phase == Phase.LOADING_WEIGHTS  # the old server's 200 is not our ready
    assert snap.verdict is None
    d.advance(15)
    snap = d.tick(chunk(), alive(port=old))
    assert snap.verdict is not None and snap.verdict.outcome == Outcome.PORT_CONFLICT
    assert "PID 999" in snap.verdict.diagnosis


def leftover(pid: int) -> Orphan:
    return Orphan(pid, 1, "sglang::scheduler_TP0", "sleeping", 7200.0, "root",
                  ("its launcher is gone",), uid=os.getuid(), start_ticks=5000)


def guard(pid: int) -> str:
    return (f"[ \"$(cut -d' ' -f22 /proc/{pid}/stat)\" = 5000 ] && [ -O /proc/{pid} ] && "
            f"grep -qzE '^sglang::scheduler_TP0( .*)?$' /proc/{pid}/cmdline && kill {pid} && "
            f"kill -CONT {pid}")


@pytest.mark.parametrize(("leftovers", "step"), [
    ((4242,), "stop python -m sglang.launch_server --port 30000 (kill 999), or start the "
              f"server on another --port; also: stop your leftovers: {guard(4242)}"),
    ((999, 4242), f"stop your leftovers: {guard(999)}; {guard(4242)}; then start again"),
])
def test_leftovers_elsewhere_on_the_host_do_not_hide_the_port_holder(
    leftovers: tuple[int, ...], step: str
) -> None:
    """The holder's own kill comes first unless the holder is one of the leftovers (then
    stopping them frees the port). CI once saw another test's process taken for a leftover
    replace the holder's PID in the step."""
    d = Driver()
    old = PortStatus(30000, True, 999, "python", "python -m sglang.launch_server --port 30000",
                     held_by_server=False)
    snap = d.tick(chunk(f.ARGS, *f.BEGIN), alive(port=old),
                  orphans=OrphanReport(tuple(leftover(pid) for pid in leftovers)))
    conflict = snap.flag("port_conflict")
    assert conflict is not None and "leftover SGLang processes" in conflict.evidence
    assert conflict.next_step == step


def test_without_port_information_an_answer_during_loading_is_a_foreign_server() -> None:
    d = Driver(has_process=False)
    d.answer(HealthOutcome.OK, 200)
    snap = d.tick(chunk(f.ARGS, *f.BEGIN))
    assert snap.phase == Phase.LOADING_WEIGHTS
    conflict = snap.flag("port_conflict")
    assert conflict is not None and "while the log shows loading_weights" in conflict.evidence


def test_address_in_use_at_bind_time_is_a_port_conflict_verdict() -> None:
    d = Driver()
    _start_to_capture(d)
    line = (
        f"{f.T} ERROR:    [Errno 98] error while attempting to bind on address "
        "('127.0.0.1', 30000): address already in use"
    )
    snap = d.tick(chunk(*f.GRAPH_END, *f.UVICORN[:2], line), alive())
    assert snap.phase == Phase.CRASHED
    assert snap.verdict is None  # the verdict waits for the traceback (issue 10)
    d.advance(5)
    snap = d.tick(chunk(), alive())
    assert snap.verdict is not None and snap.verdict.outcome == Outcome.PORT_CONFLICT
    assert "address already in use" in snap.verdict.diagnosis


def test_sigterm_drain_is_stopping_then_down() -> None:
    d = Driver()
    d.answer(HealthOutcome.OK, 200)
    d.tick(chunk(f.READY), alive())
    d.answer(HealthOutcome.UNHEALTHY, 503)
    snap = d.tick(
        chunk(
            f"{f.T} SIGTERM received. signum=15. Draining requests and shutting down",
            f"{f.T} Gracefully exiting... Remaining number of requests 2.",
        ),
        alive(),
    )
    assert snap.phase == Phase.STOPPING
    assert snap.verdict is not None and snap.verdict.outcome == Outcome.STOPPED
    assert "SIGTERM received" in snap.verdict.diagnosis
    assert "2 requests still draining" in snap.verdict.diagnosis
    snap = d.tick(chunk(), gone(code=0))
    assert snap.phase == Phase.DOWN
    assert snap.flag("process_exited") is not None
    assert snap.verdict is not None and snap.verdict.outcome == Outcome.STOPPED


def test_ready_then_dying_goes_degraded_then_crashed() -> None:
    d = Driver()
    d.answer(HealthOutcome.UNHEALTHY, 503)
    d.tick(chunk(f.ARGS, *f.UVICORN), alive())
    d.answer(HealthOutcome.OK, 200, latency=1.0)
    assert d.tick(chunk(), alive()).phase == Phase.READY
    d.answer(HealthOutcome.TIMEOUT)
    assert d.tick(chunk(), alive()).phase == Phase.READY  # one bad probe is not a trend
    d.advance(3)
    d.answer(HealthOutcome.TIMEOUT)
    snap = d.tick(chunk(), alive())
    assert snap.phase == Phase.DEGRADED
    degraded = snap.flag("degraded")
    assert degraded is not None and "2 bad probes in a row, for 3s" in degraded.evidence
    d.answer(HealthOutcome.REFUSED)
    snap = d.tick(chunk(), gone())
    assert snap.phase == Phase.CRASHED
    assert snap.verdict is not None and snap.verdict.outcome == Outcome.CRASHED


def test_slow_health_answers_count_as_degraded() -> None:
    d = Driver(settings=WatchSettings(slow_health_s=2.0))
    d.answer(HealthOutcome.OK, 200)
    d.tick(chunk(), alive())
    for _ in range(2):
        d.answer(HealthOutcome.OK, 200, latency=4.0)
        snap = d.tick(chunk(), alive())
    assert snap.phase == Phase.DEGRADED
    d.answer(HealthOutcome.OK, 200, latency=1.0)
    assert d.tick(chunk(), alive()).phase == Phase.READY


def test_url_only_mode_collapses_phases_and_infers_a_crash_from_the_port() -> None:
    d = Driver(has_log=False, has_process=False, launched=False)
    d.answer(HealthOutcome.REFUSED)
    snap = d.tick()
    assert snap.phase == Phase.UNREACHABLE
    assert any("log not found" in n for n in snap.notes)
    assert any("no process" in n for n in snap.notes)
    d.answer(HealthOutcome.UNHEALTHY, 503)
    assert d.tick().phase == Phase.WARMING_UP
    d.answer(HealthOutcome.OK, 200)
    assert d.tick().phase == Phase.READY
    phases = []
    for _ in range(2):
        d.answer(HealthOutcome.REFUSED)
        phases.append(d.tick().phase)
    assert phases == [Phase.READY, Phase.DEGRADED]
    d.answer(HealthOutcome.REFUSED)
    snap = d.tick()
    assert snap.phase == Phase.CRASHED
    assert snap.verdict is not None and "stopped answering after ready" in snap.verdict.diagnosis


def test_expected_window_and_stall_limits_are_learned_from_history(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    first = Driver(history=history)
    _start_to_capture(first)  # 25 s; capture began at 20 s and will be silent for 45 s
    first.advance(40)
    first.tick(chunk(*f.GRAPH_END, f.LIMITS, *f.UVICORN), alive())
    first.answer(HealthOutcome.OK, 200)
    first.tick(chunk(f.READY), alive())
    record = first.state.recorded
    assert record is not None
    assert record.signature == "model=/models/Kimi-K2.5 tp=2 dp=1 pp=1 ep=1 quant=none spec=none"
    assert record.total_s == pytest.approx(65.0)
    assert record.phases["capturing_graphs"] == pytest.approx(45.0)
    assert record.max_gaps["capturing_graphs"] == pytest.approx(45.0)

    second = Driver(history=history)
    snap = second.tick(chunk(f.ARGS), alive())
    assert snap.expected.window_s == pytest.approx(65.0 * 1.25)
    assert "history" in snap.expected.source and snap.expected.starts_recorded == 1
    _start_to_capture(second)
    second.advance(60)  # 85 s since launch: slower than anything recorded
    snap = second.tick(chunk(), alive())
    slow = snap.flag("slow_startup")
    assert slow is not None and "history" in slow.evidence
    second.advance(60)  # 125 s of silence in capture: below 3 × 45 s learned
    assert second.tick(chunk(), alive()).flag("stalled") is None
    second.advance(11)  # 136 s
    stalled = second.tick(chunk(), alive()).flag("stalled")
    assert stalled is not None and "limit 2m15s, history of 1 start-up)" in stalled.evidence
    assert "capturing_graphs usually takes 45s" in stalled.evidence


def test_nothing_malformed_escapes_as_an_exception() -> None:
    d = Driver()
    d.answer(HealthOutcome.ERROR)
    garbage = chunk(
        "\x00\x01\xff",
        "[2026-13-45 99:99:99 TP] Load weight begin. avail mem=x GB",
        "Multi-thread loading shards: 999% Completed | 9/0 [",
        "",
        error="cannot read /var/log/x.log: Permission denied",
    )
    snap = d.tick(garbage, problems=("process probe failed: AccessDenied",))
    assert "cannot read /var/log/x.log: Permission denied" in snap.problems
    assert "process probe failed: AccessDenied" in snap.problems
    assert any(p.startswith("/health:") for p in snap.problems)


def test_backlog_lines_are_dated_by_their_timestamps_so_an_old_stall_shows_at_once() -> None:
    import time

    wall0 = time.mktime(time.strptime("2026-11-30 03:00:00", "%Y-%m-%d %H:%M:%S"))
    d = Driver(date_backlog=True, launched=False, wall0=wall0)
    lines = [f.ARGS, *f.BEGIN, *f.WEIGHTS_END, *f.KV, *f.GRAPH_BEGIN]  # stamped 02:28:44
    snap = d.tick(chunk(*lines), alive(created=wall0 - 2000))
    assert snap.phase == Phase.CAPTURING_GRAPHS
    stalled = snap.flag("stalled")
    assert stalled is not None and "no log progress for 31m15s" in stalled.evidence
    assert snap.elapsed_s == pytest.approx(2000.0)


def test_a_new_server_args_line_after_ready_starts_a_new_startup() -> None:
    d = Driver()
    d.answer(HealthOutcome.OK, 200)
    d.tick(chunk(f.ARGS, f.READY), alive())
    d.answer(HealthOutcome.REFUSED)
    snap = d.tick(chunk(f.ARGS, *f.BEGIN), alive())
    assert snap.phase == Phase.LOADING_WEIGHTS
    assert snap.flag("degraded") is None


def test_a_scheduler_child_dying_while_the_parent_lives_is_flagged() -> None:
    d = Driver()
    rank = ChildInfo(201, "sglang::scheduler_TP1", False)
    snap = d.tick(chunk(f.ARGS), alive(lost=(rank,)))
    flag = snap.flag("rank_exited")
    assert flag is not None and "PID 201 (sglang::scheduler_TP1)" in flag.evidence


def test_gpu_memory_held_by_another_process_is_flagged_and_absent_nvml_is_a_note() -> None:
    d = Driver()
    gpus = GpuReport(
        True, devices=(GpuDevice(0, "H100", 70 << 30, 80 << 30, (GpuProcess(777, 69 << 30),)),)
    )
    snap = d.tick(chunk(f.ARGS, *f.BEGIN), alive(), gpu=gpus)
    held = snap.flag("gpu_memory_held")
    assert held is not None and "GPU 0: 69.0 GiB by PID 777" in held.evidence
    snap = d.tick(
        chunk(), alive(), gpu=GpuReport(False, "no GPU information (pynvml not installed)")
    )
    assert "no GPU information (pynvml not installed)" in snap.notes

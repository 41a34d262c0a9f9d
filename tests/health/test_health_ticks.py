"""Issue 10's behaviours, tick by tick on made-up observations: late attaches dated by the
log's own clock, frozen ready times, incarnations, deliberate stops, settled crash verdicts,
lasting port conflicts, laggard ranks, next steps. Lines are real SGLang lines (corpus or
0.5.23); no test sleeps."""

from __future__ import annotations

import time
from pathlib import Path

import health_fakes as f
import pytest
from health_fakes import Driver, alive, chunk, gone

from eagle_tui.core.health.history import StartupHistory
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.poller import HealthOutcome
from eagle_tui.core.health.snapshot import Outcome
from eagle_tui.core.proc.report import PortStatus, ProbeReport
from eagle_tui.core.serverlog.follower import LogChunk

STAMP = "2026-11-30 02:28:44"
WALL_AT_STAMP = time.mktime(time.strptime(STAMP, "%Y-%m-%d %H:%M:%S")) + 1.0
NCCL = [f"[{STAMP} TP{r}] sglang is using nccl==2.21.5" for r in (0, 1)]
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/sgl-workspace/sglang/python/sglang/launch_server.py", line 32, in <module>',
    "    server_args = prepare_server_args(sys.argv[1:])",
    "ValueError: The checkpoint you are trying to load has model type `glm_moe_dsa` but "
    "Transformers does not recognize this architecture.",
]
SIGTERM_GROUP = [  # real SGLang 0.5.23 (corpus 45)
    f"[{STAMP}] SIGTERM received. signum=None frame=None. Draining requests and shutting down...",
    f"[{STAMP}] Subprocess scheduler_0 (pid=6043) crashed with exit code -15. Triggering SIGQUIT "
    "for cleanup...",
    f"[{STAMP}] SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
]


def backlog(*lines: str, mtime: float) -> LogChunk:
    return LogChunk(tuple(lines), "", ("opened",), None, mtime)


def test_attaching_to_a_hung_server_flags_at_once_with_the_true_silence() -> None:
    # The log went quiet after "sglang is using nccl" 2 minutes before the watch began.
    d = Driver(date_backlog=True, launched=False, wall0=WALL_AT_STAMP + 120)
    snap = d.tick(backlog(f.ARGS, *NCCL, mtime=WALL_AT_STAMP), alive())
    assert snap.phase == Phase.DISTRIBUTED_INIT
    assert snap.last_log_age_s == pytest.approx(120.0)
    stalled = snap.flag("stalled")
    assert stalled is not None
    assert "no log progress for 2m00s in distributed_init" in stalled.evidence
    assert "NCCL_DEBUG=INFO" in stalled.next_step and "py-spy dump --pid 100" in stalled.next_step
    assert snap.verdict is not None and snap.verdict.outcome == Outcome.STALLED


def test_a_log_in_another_time_zone_is_placed_by_the_files_mtime() -> None:
    # Container in UTC, host 3 h ahead: the stamps say 02:28, the file was written at 05:28.
    d = Driver(date_backlog=True, launched=False, wall0=WALL_AT_STAMP + 3 * 3600 + 30)
    snap = d.tick(backlog(f.ARGS, *NCCL, mtime=WALL_AT_STAMP + 3 * 3600), alive())
    assert snap.last_log_age_s == pytest.approx(30.0)
    assert snap.flag("stalled") is None
    assert any("time zone +3.00 h" in note for note in snap.notes)


def test_ready_after_is_frozen_and_an_attach_after_ready_is_not_history(tmp_path: Path) -> None:
    history = tmp_path / "h.jsonl"
    d = Driver(date_backlog=True, launched=False, wall0=WALL_AT_STAMP + 400, history=history)
    d.answer(HealthOutcome.OK, 200)
    lines = [f.ARGS, *f.BEGIN, *f.WEIGHTS_END, *f.KV, *f.UVICORN, f.READY]
    snap = d.tick(backlog(*lines, mtime=WALL_AT_STAMP), alive(created=WALL_AT_STAMP - 42))
    assert snap.phase == Phase.READY
    assert snap.ready_after_s == pytest.approx(42.0, abs=1.5)  # not the 7 minutes since
    d.advance(60)
    later = d.tick(chunk(), alive(created=WALL_AT_STAMP - 42))
    assert later.ready_after_s == snap.ready_after_s and later.elapsed_s > snap.elapsed_s
    assert StartupHistory(history).records(snap.signature or "") == []
    assert any("attached after this start-up began" in note for note in later.notes)


def test_a_watched_start_is_recorded_once_with_its_outcome(tmp_path: Path) -> None:
    history = tmp_path / "h.jsonl"
    d = Driver(history=history)
    d.tick(chunk(f.ARGS, *f.BEGIN), alive())
    d.advance(30)
    d.tick(chunk(f.SCHED_EXC, f.OOM), alive())
    d.advance(6)
    snap = d.tick(chunk(), alive())
    assert snap.verdict is not None and snap.verdict.outcome == Outcome.CRASHED
    d.tick(chunk(), gone(code=1))
    records = StartupHistory(history).records(snap.signature or "")
    assert [r.outcome for r in records] == ["crashed"]


def test_a_restart_in_the_same_log_is_a_new_timeline_never_a_crash(tmp_path: Path) -> None:
    history = tmp_path / "h.jsonl"
    d = Driver(history=history)
    d.answer(HealthOutcome.OK, 200)
    first = d.tick(chunk(f.ARGS, *f.BEGIN, f.READY), alive())
    assert first.phase == Phase.READY and first.incarnation == 1
    d.advance(5)
    d.answer(HealthOutcome.REFUSED)
    snap = d.tick(chunk(f.ARGS, *f.BEGIN), alive(pid=200))
    assert snap.incarnation == 2 and snap.phase == Phase.LOADING_WEIGHTS
    assert snap.ready_after_s is None and snap.flag("process_exited") is None
    assert Phase.CRASHED not in {s.phase for s in d.snapshots}
    assert len(StartupHistory(history).records(snap.signature or "")) == 1


def test_another_pid_on_the_port_is_a_new_incarnation_and_not_a_crash() -> None:
    d = Driver(launched=False)
    d.tick(chunk(f.ARGS, *f.BEGIN), alive(pid=100))
    d.advance(5)
    snap = d.tick(chunk(), alive(pid=300))  # the old one was replaced; its log is old news
    assert snap.incarnation == 2 and snap.phase != Phase.CRASHED
    assert snap.process is not None and snap.process.pid == 300


def test_sigterm_with_ranks_ending_on_minus_15_is_stopped_not_fatal() -> None:
    d = Driver()
    d.answer(HealthOutcome.OK, 200)
    d.tick(chunk(f.ARGS, f.READY), alive())
    snap = d.tick(chunk(*SIGTERM_GROUP), alive())
    assert snap.phase == Phase.STOPPING
    assert not [name for name in snap.flag_names if name.startswith("fatal")]
    assert snap.verdict is not None and snap.verdict.outcome == Outcome.STOPPED
    d.advance(5)
    down = d.tick(chunk(), gone(code=-9))  # SGLang kills its own tree at the end
    assert down.phase == Phase.DOWN and down.verdict is not None
    assert down.verdict.outcome == Outcome.STOPPED
    assert down.elapsed_s is not None and down.phase_s <= down.elapsed_s


def test_ranks_ending_on_minus_15_with_no_sigterm_line_are_a_stop_too() -> None:
    d = Driver()
    d.tick(chunk(f.ARGS, *f.BEGIN), alive())
    snap = d.tick(chunk(*SIGTERM_GROUP[1:]), alive())
    assert snap.phase == Phase.STOPPING and snap.verdict is not None
    assert snap.verdict.outcome == Outcome.STOPPED


def test_the_crash_verdict_waits_for_the_traceback_and_quotes_its_exception() -> None:
    d = Driver()
    d.tick(chunk(f.ARGS), alive())
    snap = d.tick(chunk(*TRACEBACK[:3]), alive())
    assert snap.verdict is None  # a bare traceback, still being written
    snap = d.tick(chunk(TRACEBACK[3]), alive())
    assert snap.verdict is None
    d.advance(5)
    snap = d.tick(chunk(), alive())
    assert snap.verdict is not None and snap.verdict.outcome == Outcome.CRASHED
    assert "(exception)" in snap.verdict.diagnosis and "ValueError: The checkpoint" in (
        snap.verdict.diagnosis
    )
    assert "silent exit" not in snap.verdict.diagnosis


def test_a_traceback_the_start_up_survives_is_no_crash() -> None:
    d = Driver()
    d.tick(chunk(f.ARGS, *TRACEBACK), alive())
    d.tick(chunk(*f.BEGIN), alive())  # the start-up moved on
    d.advance(10)
    snap = d.tick(chunk(), alive())
    assert snap.phase == Phase.LOADING_WEIGHTS and snap.verdict is None


def test_a_process_exit_settles_the_verdict_at_once_and_names_the_exception() -> None:
    d = Driver()
    d.tick(chunk(f.ARGS, f.SCHED_EXC, f.OOM), alive())
    snap = d.tick(chunk(), gone(code=-9))
    assert snap.verdict is not None and "fatal:oom" in snap.verdict.diagnosis
    assert "CUDA out of memory" in snap.verdict.diagnosis and snap.verdict.next_step


def test_silent_exit_only_when_the_log_has_no_error_line() -> None:
    d = Driver()
    d.tick(chunk(f.ARGS, "RuntimeError: something the watcher has no rule for"), alive())
    snap = d.tick(chunk(), gone(code=1))
    assert snap.verdict is not None and "silent exit" not in snap.verdict.diagnosis
    assert "something the watcher has no rule for" in snap.verdict.diagnosis


def test_a_port_conflict_stays_flagged_after_the_server_dies_until_the_port_is_free() -> None:
    held = PortStatus(30000, True, 999, "python3", "python3 -m http.server 30000", False)
    d = Driver()
    snap = d.tick(chunk(f.ARGS, *f.BEGIN), alive(port=held))
    conflict = snap.flag("port_conflict")
    assert conflict is not None and "PID 999 (python3 -m http.server 30000)" in conflict.evidence
    assert "kill 999" in conflict.next_step
    snap = d.tick(chunk(), ProbeReport(gone().process, held))
    assert snap.flag("port_conflict") is not None  # the server is gone, the holder is not
    snap = d.tick(chunk(), ProbeReport(gone().process, PortStatus(30000, False)))
    assert snap.flag("port_conflict") is None


def test_ranks_missing_from_the_numbering_are_named_when_the_rest_moved_on() -> None:
    ends = [  # corpus 24: TP2, TP4 and TP6 never finish loading
        f"[{STAMP} TP{r}] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, "
        "avail mem=38.13 GB"
        for r in (0, 1, 3, 5, 7)
    ]
    d = Driver()
    d.tick(chunk(*ends), alive())
    d.advance(60)
    snap = d.tick(chunk(), alive())
    assert snap.lagging_ranks == ("TP2", "TP4", "TP6")
    stalled = snap.flag("stalled")
    assert stalled is not None and "TP2 never logged" in stalled.evidence
    assert snap.phase == Phase.LOADING_WEIGHTS  # the laggards are still loading


def test_lines_no_rule_reads_are_counted_and_kept() -> None:
    d = Driver()
    snap = d.tick(chunk(f.ARGS, "something new in a 2027 build", "and another"), alive())
    assert snap.unknown_lines == 2 and snap.unknown_samples[-1] == "and another"


def test_a_log_from_days_ago_is_dated_by_its_file_not_taken_for_a_time_zone() -> None:
    # 3 days + 1 minute: near a quarter-hour multiple, but no time zone is 72 h away.
    gap = 3 * 86400 + 60
    d = Driver(date_backlog=True, launched=False, wall0=WALL_AT_STAMP + gap + 45)
    snap = d.tick(backlog(f.ARGS, *NCCL, mtime=WALL_AT_STAMP + gap), alive())
    assert snap.last_log_age_s == pytest.approx(45.0)
    assert any("file modification time" in note for note in snap.notes)

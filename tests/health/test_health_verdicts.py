"""Verdicts from the processes (issue 19 item 3), tick by tick on a hand-moved clock.

The watcher's state machine gets the log lines of a start-up and, each tick, a process
evidence sample shaped as ``core.proc.sampler`` makes it (the sim and real-SGLang tests run
the sampler itself). Time is fake, so "a compiler burns for three minutes" takes no time.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import health_fakes as f
from health_fakes import Driver, alive, chunk

from eagle_tui.core.health.cause import Cause, read_cause
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.poller import HealthOutcome
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import HealthSnapshot, Outcome
from eagle_tui.core.proc.evidence import (
    BlockedCall,
    FileEvidence,
    FileKind,
    ProcessEvidence,
    State,
    TreeEvidence,
)
from eagle_tui.core.proc.peers import DistInit, PeerEvidence
from eagle_tui.core.proc.titles import Kind, Role

RANK = Role(Kind.SCHEDULER, "sglang::scheduler_TP0", (("TP", 0),))
LAUNCHER = Role(Kind.LAUNCHER, "python")
COMPILER = Role(Kind.COMPILER, "cc1plus")


@dataclass
class Proc:
    """One process as the sampler would see it over fake time."""

    pid: int
    role: Role
    cpu: float = 0.01
    read: float = 0.0
    state: State = State.SLEEPING
    since: float = 0.0  # when it became quiet / entered its state
    blocked: BlockedCall | None = None
    files: tuple[FileEvidence, ...] = field(default=())

    def at(self, now: float) -> ProcessEvidence:
        quiet = self.cpu < 0.1 and self.read < 4096
        held = now - self.since
        blocked = replace(self.blocked, since_s=held) if self.blocked else None
        files = tuple(replace(f, still_s=held) if f.bytes_per_s == 0 else f for f in self.files)
        return ProcessEvidence(
            pid=self.pid, ppid=100, depth=1, role=self.role, comm=self.role.title[:15],
            state=self.state, age_s=600.0, cpu_s=10.0, cpu_per_s=self.cpu,
            read_per_s=self.read, write_per_s=0.0, disk_read_per_s=0.0, major_faults_per_s=0.0,
            quiet_s=now - self.since if quiet else 0.0, state_s=now - self.since,
            rss_bytes=1 << 30, threads=8, files=files, blocked=blocked,
        )  # fmt: skip


def tree(now: float, *procs: Proc, peers: PeerEvidence | None = None) -> TreeEvidence:
    return TreeEvidence(now, 100, True, 1.0, tuple(p.at(now) for p in procs), peers)


def _to_capture_bar(d: Driver) -> None:
    """A start-up up to the first capture bar update, then silence."""
    d.answer(HealthOutcome.REFUSED)
    d.tick(chunk(f.ARGS, *f.BEGIN), alive())
    d.advance(5)
    d.tick(chunk(*f.WEIGHTS_END, *f.KV), alive())
    d.advance(2)
    d.tick(chunk(*f.GRAPH_BEGIN, partial=f.GRAPH_BAR.format(bs=64, pct=0)), alive())


def _ticks(d: Driver, seconds: int, *procs: Proc, **kw: PeerEvidence) -> list[HealthSnapshot]:
    out = []
    for _ in range(seconds):
        d.advance(1)
        out.append(d.tick(chunk(), alive(), evidence=tree(d.now, *procs, **kw)))
    return out


def _verdict_after(d: Driver, limit: int, *procs: Proc, **kw: PeerEvidence) -> float:
    """Tick until a verdict; seconds it took (fails after ``limit``)."""
    start = d.now
    for _ in range(limit):
        d.advance(1)
        snap = d.tick(chunk(), alive(), evidence=tree(d.now, *procs, **kw))
        if snap.verdict is not None:
            return d.now - start
    raise AssertionError(f"no verdict in {limit}s: {d.snapshots[-1].flags}")


def test_a_compiler_burning_three_minutes_is_busy_never_hung_then_hung_within_a_minute() -> None:
    d = Driver()
    _to_capture_bar(d)
    rank = Proc(201, RANK, since=d.now)
    compiler = Proc(301, COMPILER, cpu=0.98)
    during = _ticks(d, 180, rank, compiler)
    assert all(s.verdict is None and s.flag("stalled") is None for s in during)
    busy = during[-1].busy
    assert all(s.flag("busy") is None for s in during)  # no flag: nothing is wrong
    assert busy is not None and busy.cause == "busy"
    assert "compiling: cc1plus (PID 301) 0.98 CPU/s" in busy.evidence
    assert "no log line for 3m" in busy.evidence
    assert "but the processes are working" in busy.evidence
    # the compiler ends; nothing prints, nothing works
    idle = Proc(201, RANK, since=d.now)
    took = _verdict_after(d, 120, idle)
    assert took <= 60
    last = d.snapshots[-1]
    assert last.verdict is not None and last.verdict.outcome == Outcome.STALLED
    assert last.verdict.cause == "hung"
    assert last.verdict.diagnosis.startswith("hung: every process quiet (no CPU, no I/O")
    assert "TP0 (PID 201) sleeping" in last.verdict.diagnosis


def test_a_hang_right_after_graph_capture_begins_is_called_within_a_minute() -> None:
    """``graphs_begin`` allows 10 minutes of silence (a JIT compile prints nothing); the
    processes say sooner that nothing runs."""
    d = Driver()
    d.answer(HealthOutcome.REFUSED)
    d.tick(chunk(f.ARGS, *f.BEGIN, *f.WEIGHTS_END, *f.KV, *f.GRAPH_BEGIN), alive())
    took = _verdict_after(d, 120, Proc(201, RANK, since=d.now))
    assert 45 <= took <= 60
    assert d.snapshots[-1].verdict is not None and d.snapshots[-1].verdict.cause == "hung"


def test_a_limit_set_with_stall_is_kept_for_a_hang() -> None:
    d = Driver(settings=WatchSettings(stall_limits_s={Phase.CAPTURING_GRAPHS: 300.0}))
    d.answer(HealthOutcome.REFUSED)
    d.tick(chunk(f.ARGS, *f.BEGIN, *f.WEIGHTS_END, *f.KV, *f.GRAPH_BEGIN), alive())
    took = _verdict_after(d, 400, Proc(201, RANK, since=d.now))
    assert 300 <= took <= 302


def test_a_stopped_rank_is_named_within_fifteen_seconds() -> None:
    d = Driver()
    d.answer(HealthOutcome.REFUSED)
    d.tick(chunk(f.ARGS, *f.BEGIN), alive())
    stopped = Proc(201, RANK, state=State.STOPPED, since=d.now)
    took = _verdict_after(d, 60, Proc(100, LAUNCHER, since=d.now), stopped)
    assert took <= 15
    verdict = d.snapshots[-1].verdict
    assert verdict is not None and verdict.cause == "stopped"
    assert verdict.diagnosis.startswith("stopped: TP0 (PID 201) stopped by a signal for 1")
    assert verdict.next_step.startswith("resume it with kill -CONT 201")


def test_node_zero_missing_a_node_is_waiting_for_peers_naming_address_and_ranks() -> None:
    d = Driver()
    d.answer(HealthOutcome.REFUSED)
    d.tick(chunk(f.ARGS), alive())
    dist = DistInit("10.0.0.1", 5000, nnodes=2, node_rank=0, world_size=2)
    peers = PeerEvidence(dist, hosts_store=True, joined=1, remote=(), connected=1, trying=0)
    took = _verdict_after(d, 120, Proc(201, RANK, since=d.now), peers=peers)
    assert took <= 60
    verdict = d.snapshots[-1].verdict
    assert verdict is not None and verdict.cause == "waiting for peers"
    assert ("waiting for peers: distributed init 10.0.0.1:5000: this node hosts the store; "
            "1 of 2 ranks connected; missing node 1 (rank 1)") in verdict.diagnosis
    assert "--dist-init-addr 10.0.0.1:5000" in verdict.next_step


def test_a_read_blocked_on_a_named_pipe_is_blocked_on_io_naming_the_file() -> None:
    d = Driver()
    d.answer(HealthOutcome.REFUSED)
    d.tick(chunk(f.ARGS, *f.BEGIN), alive())
    call = BlockedCall("openat", "wait_for_partner", "/m/model.safetensors", 0.0,
                       "opening a FIFO that no process writes")
    rank = Proc(201, RANK, since=d.now, blocked=call)
    took = _verdict_after(d, 120, rank)
    assert took <= 60
    verdict = d.snapshots[-1].verdict
    assert verdict is not None and verdict.cause == "blocked on I/O"
    assert verdict.diagnosis.startswith("blocked on I/O: model.safetensors: TP0 (PID 201)")
    assert "openat(/m/model.safetensors)" in verdict.diagnosis
    assert "head -c 1 /m/model.safetensors" in verdict.next_step


def test_a_shard_read_standing_at_zero_bytes_is_flagged_before_the_bar_limit() -> None:
    """The bar's limit is 6 minutes (slow disks); a read that stopped says so in a minute."""
    d = Driver()
    d.answer(HealthOutcome.REFUSED)
    d.tick(chunk(f.ARGS, *f.BEGIN), alive())
    d.advance(60)
    d.tick(chunk(partial=f.SHARD.format(pct=18, done=12)), alive())
    shard = FileEvidence("/m/model-00012-of-00064.safetensors", FileKind.WEIGHTS, 7,
                         5_000_000_000, 1_850_000_000, 0.0, 0.0)
    took = _verdict_after(d, 120, Proc(201, RANK, since=d.now, files=(shard,)))
    assert took <= 60
    verdict = d.snapshots[-1].verdict
    assert verdict is not None and verdict.cause == "blocked on I/O"
    assert "reading model-00012-of-00064.safetensors, 37 %, 0 B/s" in verdict.diagnosis


def test_weights_read_slowly_but_moving_keep_the_start_up_alive() -> None:
    d = Driver()
    d.answer(HealthOutcome.REFUSED)
    d.tick(chunk(f.ARGS, *f.BEGIN, partial=f.SHARD.format(pct=18, done=12)), alive())
    shard = FileEvidence("/m/model-00012-of-00064.safetensors", FileKind.WEIGHTS, 7,
                         5_000_000_000, 1_850_000_000, 20_000_000.0, 0.0)
    reader = Proc(201, RANK, cpu=0.05, read=20_000_000.0, files=(shard,))
    seen = _ticks(d, 900, reader)
    assert all(s.verdict is None and s.flag("stalled") is None for s in seen)
    busy = seen[-1].busy
    assert busy is not None and "reading weights at 20.0 MB/s" in busy.evidence


def test_the_first_sample_has_no_rates_and_says_nothing() -> None:
    first = TreeEvidence(0.0, 100, True, None, (
        ProcessEvidence(100, 1, 0, LAUNCHER, "python", State.SLEEPING, 1.0, 0.1, None, None,
                        None, None, None, 0.0, 0.0, 0, 1),
    ))  # fmt: skip
    assert read_cause(first) is None
    assert read_cause(None) is None
    gone = TreeEvidence(0.0, 100, False, 1.0)
    assert read_cause(gone) is None


def test_a_busy_rank_without_children_is_busy() -> None:
    reading = read_cause(tree(10.0, Proc(201, RANK, cpu=0.9)))
    assert reading is not None and reading.cause is Cause.BUSY
    assert reading.evidence.startswith("working: TP0 (PID 201) sleeping, 0.90 CPU/s")

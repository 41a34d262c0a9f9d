"""Made-up observations for driving ``WatchState`` tick by tick with explicit times."""

from __future__ import annotations

from pathlib import Path

from eagle_tui.core.health.history import StartupHistory
from eagle_tui.core.health.observed import Observation
from eagle_tui.core.health.poller import HealthOutcome, HealthProbe
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import HealthSnapshot
from eagle_tui.core.health.state import WatchState
from eagle_tui.core.proc.evidence import TreeEvidence
from eagle_tui.core.proc.orphans import OrphanReport
from eagle_tui.core.proc.report import ChildInfo, GpuReport, PortStatus, ProbeReport, ProcessReport
from eagle_tui.core.serverlog.follower import LogChunk

WALL0 = 1_800_000_000.0
T = "[2026-11-30 02:28:44]"


def tp(rank: int) -> str:
    return f"[2026-11-30 02:28:44 TP{rank}]"


ARGS = f"{T} server_args=ServerArgs(model_path='/models/Kimi-K2.5', tp_size=2, dp_size=1)"
BEGIN = [f"{tp(r)} Load weight begin. avail mem=76.00 GB" for r in (0, 1)]
SHARD = "Multi-thread loading shards: {pct:3d}% Completed | {done}/64 [00:10<00:10,  3.3s/it]"
WEIGHTS_END = [
    f"{tp(r)} Load weight end. elapsed=200.00 s, type=DeepseekV3ForCausalLM, dtype=torch.bfloat16,"
    " avail mem=12.00 GB, mem usage=64.00 GB."
    for r in (0, 1)
]
KV = [
    f"{tp(r)} KV Cache is allocated. #tokens: 800000, K size: 4.00 GB, V size: 4.00 GB"
    for r in (0, 1)
]
GRAPH_BEGIN = [
    f"{tp(r)} Capture target decode CUDA graph begin. backend=full, avail mem=3.0 GB"
    for r in (0, 1)
]
GRAPH_BAR = "Capturing batches (bs={bs} avail_mem=2.50 GB):  {pct}%|███       | 3/10 [00:01<00:03]"
GRAPH_END = [
    f"{tp(r)} Capture target decode CUDA graph end. bs=[1, 2], elapsed=40.00 s, mem "
    "usage=0.6 GB, avail mem=2.4 GB."
    for r in (0, 1)
]
LIMITS = (
    f"{tp(0)} max_total_num_tokens=800000, chunked_prefill_size=8192, max_prefill_tokens="
    "16384, max_running_requests=1024, context_len=262144"
)
UVICORN = [
    f"{T} INFO:     Started server process [100]",
    f"{T} INFO:     Application startup complete.",
    f"{T} INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
]
READY = f"{T} The server is fired up and ready to roll!"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
SCHED_EXC = f"{tp(1)} Scheduler hit an exception: Traceback (most recent call last):"


def chunk(*lines: str, partial: str = "", error: str | None = None) -> LogChunk:
    return LogChunk(tuple(lines), partial, (), error)


def alive(
    pid: int = 100,
    *,
    cpu: float = 50.0,
    created: float | None = None,
    children: tuple[ChildInfo, ...] = (),
    lost: tuple[ChildInfo, ...] = (),
    port: PortStatus | None = None,
) -> ProbeReport:
    process = ProcessReport(
        pid,
        True,
        "running",
        "python",
        "python -m sglang.launch_server --tp 2",
        create_time=created,
        cpu_percent=cpu,
        children=children,
        children_lost=lost,
    )
    return ProbeReport(process, port)


def gone(pid: int = 100, code: int | None = None, port: PortStatus | None = None) -> ProbeReport:
    return ProbeReport(ProcessReport(pid, False, "exited", "python", exit_code=code), port)


class Driver:
    """A ``WatchState`` plus a hand-moved clock and a /health probe counter."""

    def __init__(
        self,
        *,
        has_log: bool = True,
        has_process: bool = True,
        settings: WatchSettings | None = None,
        history: Path | None = None,
        launched: bool = True,
        date_backlog: bool = False,
        wall0: float = WALL0,
    ) -> None:
        self.now = 1000.0
        self.wall_offset = wall0 - self.now
        self.history = StartupHistory(history) if history is not None else None
        self.state = WatchState(
            settings,
            has_log=has_log,
            has_process=has_process,
            history=self.history,
            launched_at=self.now if launched else None,
            date_backlog=date_backlog,
        )
        self.seq = 0
        self.health: HealthProbe | None = None
        self.snapshots: list[HealthSnapshot] = []

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def answer(
        self, outcome: HealthOutcome, status: int | None = None, latency: float = 0.01
    ) -> None:
        self.seq += 1
        self.health = HealthProbe(outcome, status, latency, str(status), self.now, self.seq)

    def tick(
        self,
        log: LogChunk | None = None,
        probe: ProbeReport | None = None,
        gpu: GpuReport | None = None,
        problems: tuple[str, ...] = (),
        evidence: TreeEvidence | None = None,
        orphans: OrphanReport | None = None,
    ) -> HealthSnapshot:
        obs = Observation(
            now=self.now,
            wall=self.now + self.wall_offset,
            log=log,
            probe=probe,
            health=self.health,
            gpu=gpu,
            problems=problems,
            evidence=evidence,
            orphans=orphans,
        )
        snapshot = self.state.update(obs)
        self.snapshots.append(snapshot)
        return snapshot

    def phases(self) -> list[str]:
        seen: list[str] = []
        for s in self.snapshots:
            if not seen or seen[-1] != s.phase.value:
                seen.append(s.phase.value)
        return seen

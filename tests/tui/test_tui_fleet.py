"""The Fleet view (issue 22 item 5): one row per server from what the Server view's feeds
sent, capture columns from the Capture source, sort, filter, Enter; readable at 80×24 and
120×40 with 16 and 64 servers. The keys on a real terminal are in test_tui_fleet_pty.py."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from tui_fakes import FakeCapture, wait_for

from eagle_tui.core.accept.config import SpecConfig
from eagle_tui.core.accept.figures import AcceptFigure
from eagle_tui.core.accept.live import LiveAcceptance
from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.capture.dispatch import ServerStatus
from eagle_tui.core.capture.progress import CaptureProgress
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import (
    Expectation,
    Flag,
    HealthSnapshot,
    ServingLoad,
)
from eagle_tui.core.proc.report import GpuDevice, GpuProcess, GpuReport, ProcessReport
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.options import DashboardOptions, ServerTarget
from eagle_tui.tui.render.accept import AcceptanceReading
from eagle_tui.tui.render.batch import BatchSnapshot
from eagle_tui.tui.render.fleet import (
    COLUMNS,
    CaptureRates,
    FleetBoard,
    cells,
    gpu_memory,
    row_matches,
    sort_value,
    summary,
    worst_flag,
)
from eagle_tui.tui.screens.fleet import FleetScreen
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.server import ServerFeed

GB = 1_000_000_000


def snapshot(phase: Phase, *, running: int = 0, queued: int = 0, tok_s: float = 0.0,
             kv: float = 0.0, flags: tuple[Flag, ...] = ()) -> HealthSnapshot:
    load = ServingLoad("decode", running, queued, tok_s, kv, 0.5) if phase == Phase.READY \
        else None
    return HealthSnapshot(at=0.0, phase=phase, phase_s=5.0, elapsed_s=60.0,
                          expected=Expectation(600.0, "default"), window_fraction=0.1,
                          flags=flags, load=load)


def reading(accept: float) -> AcceptanceReading:
    figure = AcceptFigure(accept, "metrics", "last 60 s")
    return AcceptanceReading(LiveAcceptance(SpecConfig(algorithm="EAGLE3"), figure))


def fleet_of(count: int) -> FleetBoard:
    """``count`` servers: most ready and busy, one loading, one crashed with a fatal flag."""
    board = FleetBoard(watching=True)
    for i in range(count):
        board.watch(i, f"node{i:02d}:30000", f"http://node{i:02d}:30000")
        entry = board.servers[i]
        if i == 1:
            entry.snapshot = snapshot(Phase.LOADING_WEIGHTS)
        elif i == 2:
            entry.snapshot = snapshot(Phase.CRASHED, flags=(Flag("fatal:oom", "CUDA OOM"),))
        else:
            entry.snapshot = snapshot(Phase.READY, running=8 + i, queued=i % 3,
                                      tok_s=1000.0 + 10 * i, kv=0.5)
            entry.acceptance = reading(2.5 + i / 100)
    return board


def test_rows_say_each_servers_phase_load_acceptance_and_worst_flag() -> None:
    rows = fleet_of(4).rows()
    assert [cells(row) for row in rows] == [
        ("node00:30000", "ready", "8", "0", "1,000", "50%", "2.50", "-", "-", "-", ""),
        ("node01:30000", "weights", "-", "-", "-", "-", "-", "-", "-", "-", ""),
        ("node02:30000", "crashed", "-", "-", "-", "-", "-", "-", "-", "-", "fatal:oom"),
        ("node03:30000", "ready", "11", "0", "1,030", "50%", "2.53", "-", "-", "-", "")]
    assert summary(rows) == ("4 servers: 2 ready, 1 starting, 0 degraded, 1 down · 1 flagged · "
                             "running 19 · queued 0 · 2,030 tok/s")
    assert worst_flag(["slow_startup", "fatal:nccl", "stalled"]) == "fatal:nccl"


def test_sorting_puts_down_servers_and_bigger_numbers_first_and_filter_matches_cells() -> None:
    rows = fleet_of(6).rows()
    by_phase = sorted(rows, key=lambda row: sort_value(row, 1))
    assert [row.phase for row in by_phase][:2] == ["crashed", "weights"]
    by_tokens = sorted(rows, key=lambda row: sort_value(row, COLUMNS.index("tok/s")))
    assert [row.name for row in by_tokens][:2] == ["node05:30000", "node04:30000"]
    assert by_tokens[-1].tokens_per_s is None  # unknown sorts last
    assert [row.name for row in rows if row_matches(row, "CUDA")] == []  # cells, not evidence
    assert [row.name for row in rows if row_matches(row, "fatal")] == ["node02:30000"]


def test_capture_columns_sum_every_live_batch_per_server_and_rate_over_time() -> None:
    def batch(name: str, succeeded: int, state: BatchState = BatchState.RUNNING) -> BatchSnapshot:
        servers = (ServerStatus("http://node00:30000", "ready", "", 5, 8, 0, succeeded, 0),)
        return BatchSnapshot(name, Path(name), Path("p"), ("http://node00:30000",), state,
                             progress=CaptureProgress(state=state, servers=servers))

    rates = CaptureRates()
    assert rates.update(100.0, [batch("a", 10), batch("b", 0)]) == {
        "http://node00:30000": (10, None)}
    later = rates.update(110.0, [batch("a", 60), batch("b", 50),
                                 batch("c", 999, BatchState.FINISHED)])
    assert later == {"http://node00:30000": (10, 10.0)}  # (110 - 10) rows in 10 s
    rows = fleet_of(1).rows(later)
    assert cells(rows[0])[COLUMNS.index("cap")] == "10"  # in flight now
    assert cells(rows[0])[COLUMNS.index("cap/s")] == "10.0"


def test_gpu_memory_counts_only_the_servers_processes() -> None:
    process = ProcessReport(pid=10, alive=True, status="running")
    gpus = GpuReport(True, devices=(
        GpuDevice(0, "H100", 70 * GB, 80 * GB, (GpuProcess(10, 60 * GB), GpuProcess(99, 10 * GB))),
        GpuDevice(1, "H100", 5 * GB, 80 * GB, (GpuProcess(99, 5 * GB),))))
    assert gpu_memory(gpus, process) == (60.0, 80.0)
    assert gpu_memory(GpuReport(False, "no NVIDIA driver"), process) == (None, None)


def fleet_app(board: FleetBoard) -> EagleApp:
    app = EagleApp(DashboardOptions(start_view="fleet"), sources=Sources())
    app.fleet = board
    return app


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
@pytest.mark.parametrize("count", [16, 64])
async def test_readable_at_80x24_and_120x40_with_16_and_64_servers(
        size: tuple[int, int], count: int) -> None:
    app = fleet_app(fleet_of(count))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        screen.refresh_fleet()
        await pilot.pause()
        table = screen.table
        # Every column fits across (no sideways scrolling) and the table fills the height
        # between the summary line and the footer, scrolling down through the rest.
        assert table.virtual_size.width <= table.size.width, (table.virtual_size, size)
        # the view bar, the summary (two lines at 80 columns), the footer
        assert table.size.height == size[1] - (4 if size[0] == 80 else 3)
        assert table.row_count == count
        summary_line = screen.query_one("#fleet-summary").render()
        assert f"{count} servers: {count - 2} ready" in str(summary_line)


def closed_ports(count: int) -> list[int]:
    """Distinct ports nothing listens on (bound together, then released): each poll is
    refused at once."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()


@pytest.mark.slow  # 40 real watchers, each probing its port and the host's processes
async def test_every_watched_server_gets_its_feed_beyond_the_default_thread_pool() -> None:
    # Each feed is a worker thread for the whole session; Textual runs thread workers in
    # the loop's default executor, min(32, cores + 4) threads: 6 on a 2-core host. With
    # more servers the rest never started and their rows stayed empty. 40 > 32 on any host.
    targets = [ServerTarget(ServerURL.parse(f"http://127.0.0.1:{port}"), name=f"s{i:02d}")
               for i, port in enumerate(closed_ports(40))]
    settings = WatchSettings(poll_interval_s=0.2, health_timeout_s=1.0)
    feeds = tuple(ServerFeed(t, settings=settings, use_history=False) for t in targets)
    app = EagleApp(DashboardOptions(servers=tuple(targets), start_view="fleet"),
                   sources=Sources(servers=feeds, capture=FakeCapture()))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: all(entry.snapshot for entry in app.fleet.servers.values())
                       and len(app.fleet.servers) == 40, 60, "a snapshot from all 40 feeds")

"""Server view against the real simulated server (separate process, real sockets), and the
resilience cases: absent at launch, dying mid-run, answering garbage, log file deleted."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tui_fakes import FakeCapture, wait_for

from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.sim.launcher import SimProcess, free_port
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.options import DashboardOptions, ServerTarget
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.server import ServerFeed
from eagle_tui.tui.widgets.log_pane import LogPane
from eagle_tui.tui.widgets.server_card import ServerCard

pytestmark = pytest.mark.slow

FAST = WatchSettings(
    poll_interval_s=0.2, health_timeout_s=1.0, crashed_after_refusals=2, degraded_after_failures=1
)
LIVE_WAIT = 60.0


def dashboard(target: ServerTarget) -> EagleApp:
    feed = ServerFeed(target, settings=FAST, use_history=False)
    return EagleApp(
        DashboardOptions(servers=(target,)), sources=Sources(servers=(feed,), capture=FakeCapture())
    )


def phase_of(app: EagleApp) -> Phase | None:
    card = app.screen.query_one(ServerCard)
    return card.snapshot.phase if card.snapshot is not None else None


def pane_status(app: EagleApp) -> str:
    return str(app.screen.query_one(LogPane).query_one(".log-pane--status").render())


async def test_watches_a_sim_start_up_to_ready(tmp_path: Path) -> None:
    log = tmp_path / "sim.log"
    with SimProcess(["--time-scale", "0.1", "--tokens-per-s", "0"], log_path=log) as sim:
        app = dashboard(ServerTarget(
            ServerURL.parse(sim.url), name="sim", log_file=log, pid=sim.pid
        ))
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: phase_of(app) == Phase.READY, LIVE_WAIT, "ready")
            pane = app.screen.query_one(LogPane)
            # The phase can turn ready on /health 200 a moment before the pane's next batch
            # of log lines arrives, so the line is awaited, not assumed.
            await wait_for(
                pilot,
                lambda: any("fired up and ready" in line for line in pane.buffer.matching(None)),
                LIVE_WAIT,
                "the ready line in the log pane",
            )
            card = app.screen.query_one(ServerCard)
            assert card.snapshot is not None and card.snapshot.port is not None
            assert card.snapshot.port.bound


async def test_server_absent_at_launch_then_arriving(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "late.log"
    app = dashboard(ServerTarget(ServerURL("http", "127.0.0.1", port), name="late", log_file=log))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: phase_of(app) is not None, LIVE_WAIT, "first snapshot")
        assert phase_of(app) in (Phase.DOWN, Phase.UNREACHABLE)
        await wait_for(pilot, lambda: "does not exist" in pane_status(app), LIVE_WAIT, "log gone")
        with SimProcess(["--time-scale", "0", "--tokens-per-s", "0"], port=port, log_path=log):
            await wait_for(pilot, lambda: phase_of(app) == Phase.READY, LIVE_WAIT, "ready")
            assert "does not exist" not in pane_status(app)


async def test_server_dying_mid_run_shows_and_app_stays_up(tmp_path: Path) -> None:
    log = tmp_path / "dying.log"
    sim = SimProcess(["--time-scale", "0", "--tokens-per-s", "0"], log_path=log).start()
    try:
        sim.wait_ready(LIVE_WAIT)
        app = dashboard(ServerTarget(
            ServerURL.parse(sim.url), name="dying", log_file=log, pid=sim.pid
        ))
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: phase_of(app) == Phase.READY, LIVE_WAIT, "ready")
            sim.kill()
            await wait_for(
                pilot, lambda: phase_of(app) in (Phase.CRASHED, Phase.DOWN), LIVE_WAIT, "crash seen"
            )
            assert app.is_running
            card = app.screen.query_one(ServerCard)
            assert card.snapshot is not None and card.snapshot.process is not None
            assert not card.snapshot.process.alive
    finally:
        sim.close()


@pytest.fixture
def garbage_server() -> Iterator[int]:
    """A TCP server answering every connection with bytes that are not HTTP."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"\x00\xffgarbage [bold] [/] not http\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    listener.close()


async def test_server_returning_garbage_is_shown_not_fatal(garbage_server: int) -> None:
    app = dashboard(ServerTarget(ServerURL("http", "127.0.0.1", garbage_server), name="junk"))
    async with app.run_test(size=(100, 30)) as pilot:

        def probed() -> bool:
            card = app.screen.query_one(ServerCard)
            return card.snapshot is not None and card.snapshot.health is not None

        await wait_for(pilot, probed, LIVE_WAIT, "a /health probe")
        await pilot.pause(0.5)
        assert app.is_running
        assert phase_of(app) != Phase.READY
        card = app.screen.query_one(ServerCard)
        assert card.snapshot is not None and card.snapshot.health is not None
        assert not card.snapshot.health.answered or card.snapshot.health.status != 200


async def test_log_file_deleted_mid_run(tmp_path: Path) -> None:
    log = tmp_path / "deleted.log"
    with SimProcess(["--time-scale", "0", "--tokens-per-s", "0"], log_path=log) as sim:
        sim.wait_ready(LIVE_WAIT)
        app = dashboard(ServerTarget(
            ServerURL.parse(sim.url), name="sim", log_file=log, pid=sim.pid
        ))
        async with app.run_test(size=(100, 30)) as pilot:
            pane = app.screen.query_one(LogPane)
            await wait_for(pilot, lambda: len(pane.buffer) > 0, LIVE_WAIT, "log lines")
            log.unlink()
            await wait_for(
                pilot,
                lambda: "does not exist" in pane_status(app),
                LIVE_WAIT,
                "log deletion noticed",
            )
            assert app.is_running
            await wait_for(pilot, lambda: phase_of(app) == Phase.READY, LIVE_WAIT, "still ready")

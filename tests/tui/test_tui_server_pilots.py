"""The Server view driven by Textual's pilot against real processes: attaching to a running
server and to a hung one, a restart on the same URL and log, a port conflict, and a
dashboard started with no arguments that finds the servers on this host by itself."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from support.processes import Holder
from support.replay import FakeServerProcess, load_corpus, write_at_once
from tui_fakes import FakeCapture, NotifySpy, wait_for

from eagle_tui.core.health.history import StartupHistory
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import HealthSnapshot
from eagle_tui.core.proc.discover import discover_servers
from eagle_tui.core.proc.launcher import ManagedServer
from eagle_tui.core.proc.stop import StopTimeouts
from eagle_tui.core.sim.launcher import SimProcess, free_port
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.options import DashboardOptions, ServerTarget
from eagle_tui.tui.screens.confirm import ConfirmScreen
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.server import Emit, ServerDiscovery, ServerFeed
from eagle_tui.tui.widgets.server_card import ServerCard

pytestmark = pytest.mark.slow

FAST = WatchSettings(poll_interval_s=0.2, health_timeout_s=1.0)
LIVE_WAIT = 60.0
SIM_ARGS = ["--time-scale", "0.1", "--tokens-per-s", "0"]


class RecordingFeed(ServerFeed):
    """A feed that also keeps every snapshot it emits (to check what was never shown)."""

    def __init__(self, target: ServerTarget, **kwargs: object) -> None:
        super().__init__(target, settings=FAST, **kwargs)  # type: ignore[arg-type]
        self.seen: list[HealthSnapshot] = []

    def run(self, stop: threading.Event, emit: Emit) -> None:
        def keep(item: object) -> None:
            if isinstance(item, HealthSnapshot):
                self.seen.append(item)
            emit(item)  # type: ignore[arg-type]

        super().run(stop, keep)


def app_for(feed: ServerFeed) -> EagleApp:
    options = DashboardOptions(servers=(feed.target,))
    return EagleApp(options, sources=Sources(servers=(feed,), capture=FakeCapture()))


def card(app: EagleApp) -> ServerCard:
    return app.screen.query_one(ServerCard)


def latest(app: EagleApp) -> HealthSnapshot | None:
    return card(app).snapshot


def is_phase(app: EagleApp, phase: Phase) -> Callable[[], bool]:
    return lambda: (s := latest(app)) is not None and s.phase == phase


async def test_attach_to_a_running_server_shows_the_true_ready_after_and_records_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EAGLE_TUI_STATE_DIR", str(tmp_path / "state"))
    log = tmp_path / "sim.log"
    with SimProcess(SIM_ARGS, log_path=log) as sim:
        sim.wait_ready(timeout=LIVE_WAIT)
        up_since = time.monotonic()
        while time.monotonic() - up_since < 4.0:  # let it serve a while before we attach
            time.sleep(0.1)
        feed = RecordingFeed(ServerTarget(
            ServerURL.parse(sim.url), name="sim", log_file=log, pid=sim.pid
        ))
        app = app_for(feed)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, is_phase(app, Phase.READY), LIVE_WAIT, "ready")
            first = latest(app)
            assert first is not None and first.ready_after_s is not None
            assert first.elapsed_s is not None
            assert first.ready_after_s <= first.elapsed_s - 3.0  # not the time since attach
            await wait_for(pilot, lambda: len(feed.seen) >= 8, LIVE_WAIT, "more snapshots")
            assert {s.ready_after_s for s in feed.seen if s.phase == Phase.READY} == {
                first.ready_after_s
            }
            assert "ready after" in str(card(app).query_one(".card-window").render())
    history = StartupHistory(tmp_path / "state" / "startup-history.jsonl")
    assert not history.path.exists() or history.path.read_text() == ""


async def test_attach_to_a_hung_server_flags_at_once(tmp_path: Path) -> None:
    hung = next(log for log in load_corpus() if log.name.startswith("09-"))
    path = tmp_path / "hung.log"
    write_at_once(hung, path, mtime=time.time() - 150)  # silent for 2.5 minutes already
    server = FakeServerProcess("-m", "sglang.launch_server")
    try:
        target = ServerTarget(
            ServerURL("http", "127.0.0.1", free_port()), log_file=path, pid=server.pid
        )
        feed = RecordingFeed(target, use_history=False)
        app = app_for(feed)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: bool(feed.seen), LIVE_WAIT, "first snapshot")
            first = feed.seen[0]
            assert first.phase == Phase.DISTRIBUTED_INIT
            stalled = first.flag("stalled")
            assert stalled is not None and "no log progress for 2m3" in stalled.evidence
            assert first.last_log_age_s is not None and first.last_log_age_s >= 150
            await wait_for(pilot, lambda: latest(app) is not None, LIVE_WAIT, "the card")
            flags = str(card(app).query_one(".card-flags").render())
            assert "stalled" in flags and "next: py-spy dump" in flags
    finally:
        server.close()


def phase_story(seen: list[HealthSnapshot]) -> list[tuple[str, int | None, str | None]]:
    """Each change of phase or PID with its verdict, for a failure message."""
    story: list[tuple[str, int | None, str | None]] = []
    for s in seen:
        pid = s.process.pid if s.process is not None else None
        if not story or story[-1][:2] != (s.phase.value, pid):
            story.append((s.phase.value, pid, s.verdict.diagnosis[:300] if s.verdict else None))
    return story


async def test_restart_on_the_same_url_and_log_is_a_new_timeline_not_a_crash(
    tmp_path: Path,
) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    feed = RecordingFeed(ServerTarget(
        ServerURL("http", "127.0.0.1", port), log_file=log
    ), use_history=False)
    app = app_for(feed)
    async with app.run_test(size=(120, 40)) as pilot:
        with SimProcess(SIM_ARGS, port=port, log_path=log) as first:
            await wait_for(pilot, is_phase(app, Phase.READY), LIVE_WAIT, "first ready")
            old_pid = first.pid
            first.terminate()  # a deliberate stop: SIGTERM, drain, exit
            await wait_for(pilot, lambda: first.returncode is not None, LIVE_WAIT, "old exit")
        with SimProcess(SIM_ARGS, port=port, log_path=log) as second:
            await wait_for(
                pilot,
                lambda: (s := latest(app)) is not None
                and s.phase == Phase.READY
                and s.process is not None
                and s.process.pid == second.pid,
                LIVE_WAIT,
                "the new server ready",
            )
            now = latest(app)
            assert now is not None and now.incarnation >= 2 and second.pid != old_pid
            # Judged before leaving the block: closing it kills the second server while the
            # dashboard still watches, and that crash (rightly reported) is not the restart's.
            seen = list(feed.seen)
    assert Phase.CRASHED not in {s.phase for s in seen}, (old_pid, second.pid, phase_story(seen))


async def test_a_port_conflict_names_the_holder_until_it_is_resolved(
    tmp_path: Path, port_holders: Callable[..., Holder]
) -> None:
    holder = port_holders()
    log = tmp_path / "server.log"
    log.write_text(next(log for log in load_corpus() if log.name.startswith("44-")).lines[0])
    server = FakeServerProcess("-m", "sglang.launch_server", "--port", str(holder.port))
    target = ServerTarget(ServerURL("http", "127.0.0.1", holder.port), log_file=log, pid=server.pid)
    feed = RecordingFeed(target, use_history=False)
    app = app_for(feed)
    try:
        async with app.run_test(size=(120, 40)) as pilot:

            def conflict() -> bool:
                s = latest(app)
                return s is not None and s.flag("port_conflict") is not None

            await wait_for(pilot, conflict, LIVE_WAIT, "the conflict")
            flag = latest(app).flag("port_conflict")  # type: ignore[union-attr]
            assert flag is not None and f"PID {holder.pid}" in flag.evidence
            assert f"kill {holder.pid}" in flag.next_step
            server.send("exit 1")  # the server gives up; the port is still taken
            await wait_for(pilot, is_phase(app, Phase.CRASHED), LIVE_WAIT, "the server gone")
            seen = len(feed.seen)
            # polled every 0.2 s: the router and acceptance looks, which wait out their
            # timeouts on a port that takes connections and never answers, must not hold
            # the snapshots back (they came every 10-15 s)
            await wait_for(pilot, lambda: len(feed.seen) >= seen + 5, 5.0,
                           "five more looks at the polling pace")
            assert conflict()
            os.kill(holder.pid, 15)
            await wait_for(pilot, lambda: not conflict(), LIVE_WAIT, "the conflict resolved")
    finally:
        server.close()


def card_states(app: EagleApp) -> list[str]:
    """``pid url phase (verdict)`` of every server card, for failure messages."""
    return [f"{c.target.pid} {c.target.url} "
            + (f"{c.snapshot.phase.value} ({c.snapshot.verdict})" if c.snapshot else "no snapshot")
            for c in app.screen.query(ServerCard)]


async def test_with_no_arguments_the_dashboard_finds_servers_and_their_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EAGLE_TUI_STATE_DIR", str(tmp_path / "state"))
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    with SimProcess(SIM_ARGS, log_path=logs[0]) as a, SimProcess(SIM_ARGS, log_path=logs[1]) as b:
        app = EagleApp(DashboardOptions())  # no --url: discovery
        assert isinstance(app.sources.discovery, ServerDiscovery)
        # ... of this test process's own servers: other test workers run sims meanwhile
        app.sources.discovery = ServerDiscovery(partial(discover_servers, within=os.getpid()))

        def found() -> dict[int, ServerTarget]:
            return {c.target.pid: c.target for c in app.screen.query(ServerCard) if c.target.pid}

        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: {a.pid, b.pid} <= set(found()), LIVE_WAIT, "both")
            for sim, log in ((a, logs[0]), (b, logs[1])):
                target = found()[sim.pid]
                # read through what the process holds (/proc/PID/fd/N), the same file
                assert target.log_file is not None and target.log_file.samefile(log)
                assert target.url.public == sim.url
            ours = (a.pid, b.pid)
            try:
                await wait_for(
                    pilot,
                    lambda: all(
                        c.snapshot is not None and c.snapshot.phase == Phase.READY
                        for c in app.screen.query(ServerCard)
                        if c.target.pid in ours
                    ),
                    LIVE_WAIT,
                    "both watched to ready",
                )
            except AssertionError as timeout:  # say where each card stood (seen once in CI)
                raise AssertionError(f"{timeout}; cards: {card_states(app)}") from None


async def test_a_stopped_rank_is_named_on_the_card_and_s_takes_the_stacks(tmp_path: Path) -> None:
    log = tmp_path / "sim.log"
    with SimProcess(["--time-scale", "0.05", "--rank-hang", "stop"], log_path=log) as sim:
        target = ServerTarget(ServerURL.parse(sim.url), name="sim", log_file=log, pid=sim.pid)
        feed = ServerFeed(target, settings=WatchSettings(poll_interval_s=0.2, health_timeout_s=1.0,
                                                         stopped_after_s=1.0), use_history=False)
        app = app_for(feed)
        toasts = NotifySpy(app)
        async with app.run_test(size=(140, 50)) as pilot:
            def flagged() -> bool:
                snapshot = latest(app)
                return snapshot is not None and snapshot.flag("stalled") is not None

            await wait_for(pilot, flagged, LIVE_WAIT, "the stopped rank")
            await pilot.pause(0.3)
            flags = str(card(app).query_one(".card-flags").render())
            assert "stalled (stopped)" in flags and "kill -CONT" in flags
            evidence = str(card(app).query_one(".card-evidence").render())
            assert "TP0 (PID" in evidence and "stopped for" in evidence
            assert "stacks: TP0 in" in evidence
            toasts.clear()
            await pilot.press("s")
            await wait_for(pilot, lambda: any(n.title == "sim: stacks" and "TP0" in n.message
                                              for n in toasts), LIVE_WAIT, "stacks")


async def test_r_restarts_a_managed_server_as_one_timeline_and_it_is_ready_again(
    tmp_path: Path,
) -> None:
    """The dashboard's `r` goes the one restart path (``Watcher.restart_managed``): the old
    server's drain is a stop, not a crash, the new start is the same watch's next timeline
    (incarnation 2, its log from the first line), and the card shows it ready again."""
    port = free_port()
    log = tmp_path / "server.log"
    argv = [sys.executable, "-m", "eagle_tui.core.sim", *SIM_ARGS, "--port", str(port)]
    server = ManagedServer(argv, log_path=log, port=port)
    server.start()
    target = ServerTarget(ServerURL("http", "127.0.0.1", port), name="sim", log_file=log,
                          argv=tuple(argv))
    feed = RecordingFeed(target, managed=server, use_history=False)
    app = app_for(feed)
    toasts = NotifySpy(app)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, is_phase(app, Phase.READY), LIVE_WAIT, "first ready")
            old_pid = server.pid
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "the question")
            await pilot.press("y")
            await wait_for(
                pilot,
                lambda: (s := latest(app)) is not None and s.phase == Phase.READY
                and s.process is not None and s.process.pid not in (None, old_pid),
                LIVE_WAIT,
                "the restarted server ready",
            )
            now = latest(app)
            assert now is not None and now.process is not None
            assert now.process.pid == server.pid and now.incarnation == 2
            await wait_for(pilot, lambda: any(f"restarted as PID {server.pid}" in n.message
                                              for n in toasts), 5, "the toast")
            seen = list(feed.seen)
        assert "SIGTERM received" in (tmp_path / "server.log.prev").read_text()
        assert Phase.CRASHED not in {s.phase for s in seen}, (old_pid, phase_story(seen))
    finally:
        await server.stop(StopTimeouts(term_s=10, kill_s=5, release_s=5))

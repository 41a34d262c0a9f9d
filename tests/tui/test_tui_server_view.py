"""Server view with fake feeds: cards, flags toasts, the log pane, managed actions."""

from __future__ import annotations

from collections.abc import Callable

from support.clock import FakeClock
from support.waiting import pilot_wait
from tui_fakes import (
    FakeCapture,
    FakeServerFeed,
    NotifySpy,
    Toast,
    health,
    ready_health,
    wait_for,
)

from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.snapshot import Flag
from eagle_tui.core.proc.report import GpuDevice, GpuProcess, GpuReport
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.options import DashboardOptions, ServerTarget
from eagle_tui.tui.render.incidents import HOLD_S
from eagle_tui.tui.screens.confirm import ConfirmScreen
from eagle_tui.tui.screens.server import ServerScreen
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.server import LogBatch
from eagle_tui.tui.widgets.gpu_panel import GpuPanel
from eagle_tui.tui.widgets.log_pane import LogPane, ServerLog
from eagle_tui.tui.widgets.server_card import ServerCard

TARGET = ServerTarget(ServerURL.parse("http://127.0.0.1:30000"), name="kimi-0", log_file=None)
SLOW = Flag("slow_startup", "elapsed 700 s > expected 600 s [bold] (3 earlier starts)")


def app_with(*feeds: FakeServerFeed, readonly: bool = False, clock: FakeClock | None = None
             ) -> EagleApp:
    """The dashboard over ``feeds``, redrawing at the fastest ``--refresh`` a user can ask
    for (what a feed sends is shown at the next redraw)."""
    return EagleApp(
        DashboardOptions(readonly=readonly, refresh_s=0.1),
        sources=Sources(servers=feeds, capture=FakeCapture()),
        clock=clock,
    )


def shown(app: EagleApp, seq: int) -> Callable[[], bool]:
    """A condition: the card shows the snapshot numbered ``seq``."""
    def check() -> bool:
        snapshot = app.screen.query_one(ServerCard).snapshot
        return snapshot is not None and snapshot.health is not None and snapshot.health.seq == seq

    return check


def toasts_after_the_hold(app: EagleApp, clock: FakeClock, spy: NotifySpy) -> list[Toast]:
    """The toasts once every incident's hold has passed (the view's periodic check, run now)."""
    clock.advance(HOLD_S)
    screen = app.screen
    assert isinstance(screen, ServerScreen)
    screen._toast_incidents()
    return list(spy)


def card_text(app: EagleApp, index: int = 0) -> str:
    card = app.screen.query_one(f"#server-card-{index}", ServerCard)
    return "\n".join(
        line.text
        for widget in card.query("*")
        if widget.display and widget.size.height
        for line in widget.render_lines(widget.region.reset_offset)
    )


async def test_card_shows_phase_window_shards_and_process() -> None:
    feed = FakeServerFeed(TARGET, [health()])
    app = app_with(feed)
    async with app.run_test(size=(120, 40)) as pilot:
        card = app.screen.query_one(ServerCard)
        await wait_for(pilot, lambda: card.snapshot is not None, what="first snapshot")
        await pilot.pause()
        text = card_text(app)
        assert "loading_weights" in text and "42s in phase" in text
        assert "│" in text and "window" in text
        assert "shards 29/64 (45%)" in text
        assert "PID 4242 running" in text and "port 30000 closed" in text
        assert "weights 42s (50s)" in text  # timeline with last start-up's duration


async def test_new_flag_toasts_once_with_literal_evidence() -> None:
    feed = FakeServerFeed(TARGET, [health()])
    clock = FakeClock()
    app = app_with(feed, clock=clock)
    spy = NotifySpy(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await feed_ready(pilot, feed)
        feed.push(health(flags=[SLOW], seq=2))
        await wait_for(pilot, shown(app, 2), what="the flagged snapshot")
        assert not spy  # held a moment: a crash's flags come over two ticks
        toasts_after_the_hold(app, clock, spy)
        await wait_for(
            pilot,
            lambda: any("slow_startup" in (n.title or "") for n in spy),
            what="toast",
        )
        feed.push(health(flags=[SLOW], seq=3))
        await wait_for(pilot, shown(app, 3), what="the same flag again")
        toasts = [n for n in toasts_after_the_hold(app, clock, spy)
                  if "slow_startup" in (n.title or "")]
        assert len(toasts) == 1 and "[bold]" in toasts[0].message
        assert "[bold] (3 earlier starts)" in card_text(app)


async def test_one_toast_per_crash_naming_the_first_fatal_line() -> None:
    """An OOM raises several flags over two ticks; one toast, quoting the OOM line."""
    feed = FakeServerFeed(TARGET, [health()])
    oom = Flag("fatal:oom", "log line 'torch.OutOfMemoryError: CUDA out of memory'")
    exited = Flag("process_exited", "PID 4242 exited with code 1")
    rank = Flag("rank_exited", "TP3 exited")
    clock = FakeClock()
    app = app_with(feed, clock=clock)
    spy = NotifySpy(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await feed_ready(pilot, feed)
        feed.push(health(Phase.CRASHED, flags=[exited, rank], seq=2))
        await wait_for(pilot, shown(app, 2), what="the exit")
        clock.advance(0.3)  # the fatal line lands a tick later
        feed.push(health(Phase.CRASHED, flags=[oom, exited, rank], seq=3))
        await wait_for(pilot, shown(app, 3), what="the fatal line")
        assert not spy
        toasts_after_the_hold(app, clock, spy)
        await wait_for(pilot, lambda: bool(spy), what="a toast")
        feed.push(health(Phase.CRASHED, flags=[oom, exited, rank, SLOW], seq=4))
        await wait_for(pilot, shown(app, 4), what="a milder flag later")
        toasts = toasts_after_the_hold(app, clock, spy)
        assert len(toasts) == 1
        assert toasts[0].title == "kimi-0: fatal:oom (+2 more on the card)"
        assert "CUDA out of memory" in toasts[0].message


async def test_gpu_panel_shows_memory_utilisation_and_foreign_holders() -> None:
    devices = tuple(
        GpuDevice(i, "H100", (60 + i) * 10**9, 80 * 10**9,
                  (GpuProcess(4242, 59 * 10**9), *((GpuProcess(999, 2 * 10**9),) if i else ())),
                  utilization_percent=97)
        for i in range(2)
    )
    feed = FakeServerFeed(TARGET, [health(gpu=GpuReport(True, devices=devices))])
    app = app_with(feed)
    async with app.run_test(size=(160, 40)) as pilot:
        panel = app.screen.query_one(GpuPanel)
        await wait_for(pilot, lambda: bool(panel.lines), what="GPU lines")
        assert panel.display
        first, second = panel.lines
        assert "GPU0 H100" in first and "60.0/80.0 GB" in first and "util 97%" in first
        assert "server 4242 59.0 GB" in first and "OTHER" not in first
        assert "OTHER 999 2.0 GB" in second  # memory a previous server still holds
        await pilot.press("p")
        assert not panel.display


async def feed_ready(pilot, feed: FakeServerFeed) -> None:  # type: ignore[no-untyped-def]
    await wait_for(pilot, feed.running.is_set, what="feed running")


async def test_ready_server_shows_load_and_latency() -> None:
    feed = FakeServerFeed(TARGET, [ready_health(seq=i, latency_s=0.01 * i) for i in range(1, 6)])
    app = app_with(feed)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, ServerScreen)
        await wait_for(pilot, lambda: len(screen.histories[0].latencies_ms) == 5, what="latency")
        await pilot.pause()
        text = card_text(app)
        assert "ready" in text and "running 12 · queued 3 · 1520 tok/s" in text
        assert "/health 200 in 0.05 s" in text


async def test_log_batches_reach_the_pane_and_errors_show() -> None:
    feed = FakeServerFeed(TARGET)
    app = app_with(feed)
    async with app.run_test(size=(100, 30)) as pilot:
        await feed_ready(pilot, feed)
        feed.push(LogBatch(("[2026] TP0 Load weight begin", "a [/] b [INST]"), partial="45%|##"))
        pane = app.screen.query_one(LogPane)
        await wait_for(pilot, lambda: len(pane.buffer) == 2, what="log lines")
        assert list(pane.query_one(ServerLog).lines) == [
            "[2026] TP0 Load weight begin",
            "a [/] b [INST]",
        ]
        feed.push(LogBatch(error="log file /x/server.log does not exist (yet)"))
        await wait_for(
            pilot,
            lambda: "does not exist" in str(pane.query_one(".log-pane--status").render()),
            what="log problem",
        )


async def test_several_servers_select_whose_log_is_shown() -> None:
    first = FakeServerFeed(TARGET, [health(), LogBatch(("first server line",))])
    second = FakeServerFeed(
        ServerTarget(ServerURL.parse("http://127.0.0.1:30001"), name="kimi-1"),
        [health(Phase.READY), LogBatch(("second server line",))],
    )
    app = app_with(first, second)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, ServerScreen)
        await wait_for(pilot, lambda: len(screen.buffers[1]) == 1, what="second log")
        log = screen.query_one(ServerLog)
        assert list(log.lines) == ["first server line"]
        await pilot.press("right_square_bracket")  # what a terminal's "]" is called
        await pilot.pause()
        assert screen.selected == 1 and list(log.lines) == ["second server line"]
        assert screen.query_one("#server-card-1").has_class("-selected")
        await pilot.press("left_square_bracket")
        await pilot_wait(pilot, lambda: screen.selected == 0, what="[ back to the first")
        await pilot.click("#server-card-1")
        await pilot_wait(pilot, lambda: screen.selected == 1, what="a click on the second card")
        assert list(log.lines) == ["second server line"]
        assert app.focused is log  # the log keeps the keys after a click on a card
        titles = [command.title for command in screen.palette_commands()]
        assert "Server: next server" in titles and "Server: previous server" in titles


async def test_managed_restart_asks_first_and_readonly_hides_it() -> None:
    feed = FakeServerFeed(TARGET, [health()], managed=True)
    app = app_with(feed)
    spy = NotifySpy(app)
    async with app.run_test(size=(100, 30)) as pilot:
        await feed_ready(pilot, feed)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, ServerScreen), what="answered no")
        await pilot.pause()
        assert feed.requests == []
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="asked again")
        await pilot.press("y")
        await wait_for(pilot, lambda: feed.requests == ["restart"], what="restart request")
        await wait_for(pilot, lambda: any("restart done" in n.message for n in spy))
    unmanaged = FakeServerFeed(TARGET, [health()])
    app = app_with(unmanaged)
    async with app.run_test(size=(100, 30)):
        assert app.screen.check_action("restart_server", ()) is False
    app = app_with(FakeServerFeed(TARGET, [health()], managed=True), readonly=True)
    async with app.run_test(size=(100, 30)):
        assert app.screen.check_action("stop_server", ()) is False


async def test_no_servers_says_how_to_add_one() -> None:
    app = app_with()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        placeholder = app.screen.query_one(".placeholder")
        assert "--url" in str(placeholder.render())


async def test_leftovers_named_by_a_flag_can_be_stopped_after_asking_not_when_readonly() -> None:
    from eagle_tui.core.proc.orphans import Orphan, OrphanReport

    leftover = Orphan(4242, 1, "sglang::scheduler_TP0", "sleeping", 300.0, "root",
                      ("its launcher is gone (parent PID 1)",), ports=(30000,))
    conflict = Flag("port_conflict", "port 30000 is held by PID 4242", next_step="kill 4242")
    snapshot = health(flags=[conflict], orphans=OrphanReport((leftover,)))
    app = app_with(FakeServerFeed(TARGET, [snapshot]))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.check_action("stop_orphans", ()) is True,
                       what="the offer")
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, ServerScreen), what="answered no")
    app = app_with(FakeServerFeed(TARGET, [health()]))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert app.screen.check_action("stop_orphans", ()) is False  # nothing to stop
    app = app_with(FakeServerFeed(TARGET, [snapshot]), readonly=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.3)
        assert app.screen.check_action("stop_orphans", ()) is False


async def test_another_users_leftovers_and_zombies_are_never_offered() -> None:
    """Issue 38: ``o`` offered every leftover on the host, whoever owned it, zombies too."""
    import os

    from eagle_tui.core.proc.orphans import Orphan, OrphanReport

    def leftover(pid: int, uid: int, state: str = "sleeping") -> Orphan:
        return Orphan(pid, 1, "sglang::scheduler_TP0", state, 300.0, f"user{uid}",
                      ("its launcher is gone (re-parented to PID 1)",), uid=uid,
                      start_ticks=100)

    theirs = leftover(4242, os.getuid() + 1)
    zombie = leftover(4243, os.getuid(), "zombie")
    conflict = Flag("port_conflict", "port 30000 is held by PID 4242", next_step="")
    only_theirs = health(flags=[conflict], orphans=OrphanReport((theirs, zombie)))
    app = app_with(FakeServerFeed(TARGET, [only_theirs]))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.3)
        assert app.screen.check_action("stop_orphans", ()) is False
        await pilot.press("o")
        await pilot.pause(0.2)
        assert isinstance(app.screen, ServerScreen)  # nothing asked
    mine = leftover(4244, os.getuid())
    mixed = health(flags=[conflict], orphans=OrphanReport((theirs, mine)))
    app = app_with(FakeServerFeed(TARGET, [mixed]))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.check_action("stop_orphans", ()) is True,
                       what="the offer")
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        asked = str(app.screen.query_one("#confirm-question").render())
        assert "PID 4244" in asked and "PID 4242" not in asked
        assert "1 of other users: not yours to stop" in asked
        await pilot.press("n")

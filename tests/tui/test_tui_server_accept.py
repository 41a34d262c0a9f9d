"""The Server view shows a speculating server's live acceptance: the figure with its source
and window, a sparkline of it over time, and the 1.00 alarm (simulated servers, real
processes)."""

from __future__ import annotations

import httpx
import pytest
from tui_fakes import FakeCapture, wait_for

from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.options import DashboardOptions, ServerTarget
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.server import ServerFeed
from eagle_tui.tui.widgets.server_card import ServerCard

pytestmark = pytest.mark.slow

FAST = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0", "--enable-metrics")
WATCH = WatchSettings(poll_interval_s=0.2, health_timeout_s=1.0)


def dashboard(url: str) -> EagleApp:
    target = ServerTarget(ServerURL.parse(url), name="spec")
    return EagleApp(DashboardOptions(servers=(target,)),
                    sources=Sources(servers=(feed_of(target),), capture=FakeCapture()))


def feed_of(target: ServerTarget) -> ServerFeed:
    return ServerFeed(target, settings=WATCH, use_history=False, accept_every_s=0.3)


def card_text(app: EagleApp, name: str) -> str:
    return str(app.screen.query_one(ServerCard).query_one(f".{name}").render())


def serve(url: str, count: int) -> None:
    for i in range(count):
        httpx.post(f"{url}/generate", timeout=30,
                   json={"text": f"say something {i}", "sampling_params": {"max_new_tokens": 80}})


async def test_the_card_shows_the_windowed_figure_and_its_sparkline() -> None:
    with SimProcess([*FAST, "--speculative-algorithm", "EAGLE3"]) as sim:
        sim.wait_ready(60)
        app = dashboard(sim.url)
        async with app.run_test(size=(140, 40)) as pilot:
            card = app.screen.query_one(ServerCard)
            await wait_for(pilot, lambda: card.reading is not None, 60, "a first reading")
            serve(sim.url, 3)

            def windowed() -> bool:
                reading = card.reading
                return (reading is not None and reading.live.figure is not None
                        and reading.live.figure.source == "metrics"
                        and len(reading.history) >= 2)

            await wait_for(pilot, windowed, 60, "a metrics figure and a history")
            text = card_text(app, "card-accept-text")
            assert "(metrics, last " in text and "EAGLE3, 4 draft tokens" in text
            assert card.query_one(".card-accept").display
            assert not card.query_one(".card-accept-alarm").display


async def test_the_card_raises_the_one_alarm() -> None:
    with SimProcess([*FAST, "--speculative-algorithm", "EAGLE",
                     "--speculative-draft-model-path", "/m/kimi-eagle3"]) as sim:
        sim.wait_ready(60)
        serve(sim.url, 2)
        app = dashboard(sim.url)
        async with app.run_test(size=(140, 40)) as pilot:
            card = app.screen.query_one(ServerCard)
            # the window's first sample must come before the request, or it holds no step
            await wait_for(pilot, lambda: card.reading is not None, 60, "a first reading")
            serve(sim.url, 1)
            await wait_for(pilot, lambda: card.reading is not None
                           and card.reading.live.alarm is not None, 60, "the alarm")
            assert "--speculative-algorithm" in card_text(app, "card-accept-alarm")


async def test_a_server_without_speculation_shows_no_acceptance_line() -> None:
    with SimProcess(list(FAST)) as sim:
        sim.wait_ready(60)
        app = dashboard(sim.url)
        async with app.run_test(size=(140, 40)) as pilot:
            card = app.screen.query_one(ServerCard)
            serve(sim.url, 1)
            feed = app.sources.servers[0]
            await wait_for(pilot, lambda: feed.looked_at_acceptance >= 3, 60, "three looks")
            await pilot.pause()
            assert card.reading is None and not card.query_one(".card-accept").display

"""The dashboard and ``status`` in front of SGLang's real router: a router card with its
workers' true states (not the router's always-200 ``/health``), and a card per worker."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.router import RouterProcess, router_installed
from tui_fakes import FakeCapture, wait_for

from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.cli.status import EXIT_SERVER_UNHEALTHY, collect, render_text
from eagle_tui.tui.options import DashboardOptions, ServerTarget
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.server import ServerFeed
from eagle_tui.tui.widgets.router_card import RouterWorkers
from eagle_tui.tui.widgets.server_card import ServerCard

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not router_installed(), reason="pip install sglang-router==0.3.2"),
]

FAST_SIM = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0", "--enable-metrics")
FAST = WatchSettings(poll_interval_s=0.3, health_timeout_s=2.0)
WAIT = 60.0


def router_text(app: EagleApp) -> str:
    found = app.screen.query(RouterWorkers)
    return str(found.first().render()) if found else ""


def cards(app: EagleApp) -> dict[str, ServerCard]:
    return {card.target.url.public: card for card in app.screen.query(ServerCard)}


async def test_router_card_shows_workers_and_each_gets_a_card() -> None:
    sims = [SimProcess(FAST_SIM).start() for _ in range(2)]
    for sim in sims:
        sim.wait_ready(WAIT)
    with RouterProcess([s.url for s in sims]) as router:
        router.wait_workers(2)
        target = ServerTarget(ServerURL.parse(router.url), name="router")
        feed = ServerFeed(target, settings=FAST, use_history=False, trust_workers=True)
        app = EagleApp(DashboardOptions(servers=(target,), trust_router_workers=True),
                       sources=Sources(servers=(feed,), capture=FakeCapture()))
        async with app.run_test(size=(140, 50)) as pilot:
            await wait_for(pilot, lambda: "2 of 2 workers can serve" in router_text(app), WAIT,
                           "the router card")
            await wait_for(pilot, lambda: {s.url for s in sims} <= set(cards(app)), WAIT,
                           "a card per worker")
            await wait_for(pilot, lambda: cards(app)[router.url].snapshot is not None
                           and cards(app)[router.url].snapshot.phase == Phase.READY, WAIT,
                           "router ready")
            for sim in sims:
                sim.kill()
            await wait_for(pilot, lambda: "0 of 2 workers can serve" in router_text(app), WAIT,
                           "workers seen down")
            assert router_text(app).count("down") >= 2
            await wait_for(pilot, lambda: cards(app)[router.url].snapshot.phase != Phase.READY,
                           WAIT, "the router not ready with no worker")
            for sim in sims:
                await wait_for(pilot, lambda s=sim: cards(app)[s.url].snapshot is not None
                               and cards(app)[s.url].snapshot.phase != Phase.READY, WAIT,
                               "the worker's own card not ready")
    for sim in sims:
        sim.close()


async def test_status_lists_the_workers_true_states(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EAGLE_TUI_STATE_DIR", str(tmp_path / "state"))  # no batches of others
    up = SimProcess(FAST_SIM).start()
    loading = SimProcess([*FAST_SIM, "--time-scale", "1"]).start()
    up.wait_ready(WAIT)
    with RouterProcess([up.url, loading.url]) as router, up:
        router.wait_workers(1)
        url, metrics = ServerURL.parse(router.url), ServerURL.parse(router.metrics_url)
        report = await collect([url], [], [metrics], trust_workers=True)
        [server] = report.servers
        assert server.phase == "ready"
        states = {w.url: w.state for w in server.router.workers}
        assert states == {up.url: "ready"}, "a worker still loading is not listed yet"
        assert server.router.metrics["smg_worker_pool_size"] == 1
        up.kill()
        up.wait_exit()
        report = await collect([url], [], trust_workers=True)
        [server] = report.servers
        assert server.phase != "ready" and report.exit_code == EXIT_SERVER_UNHEALTHY
        assert [w.state for w in server.router.workers] == ["down"]
        assert "0 of 1 workers can serve" in render_text(report)
    loading.close()


def test_watch_calls_a_router_ready_only_when_its_worker_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The router answers /health 200 at once; its only worker needs seconds to load."""
    from eagle_tui.tui.cli.main import main

    loading = SimProcess(["--time-scale", "0.3", "--tokens-per-s", "0", "--ttft", "0"]).start()
    with RouterProcess([loading.url]) as router, loading:
        router.wait_serving()
        code = main(["watch", "--url", router.url, "--interval", "0.1", "--no-history",
                     "--timeout", "90"])
        assert code == 0, capsys.readouterr().out
        assert loading.log_text().count("fired up and ready") == 1, "the worker was ready first"


SLOW_CHECKS = ("--policy", "round_robin", "--health-check-interval-secs", "60",
               "--health-failure-threshold", "3", "--log-level", "warn")
"""The router's defaults: a dead worker stays healthy in its list for minutes."""


def test_status_labels_the_routers_word_and_never_calls_a_killed_worker_ready(
    tmp_path: Path,
) -> None:
    """Issue 38: after a router's worker is killed, ``status --url ROUTER`` said ``"state":
    "ready"``: the router's word (it checks every 60 s), shown as ours."""
    import json
    import subprocess
    import sys

    env = {"EAGLE_TUI_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"}
    status = [str(Path(sys.executable).with_name("eagle-tui")), "status", "--once"]
    worker = SimProcess(FAST_SIM).start()
    worker.wait_ready(WAIT)
    with RouterProcess([worker.url], flags=SLOW_CHECKS) as router, worker:
        router.wait_workers(1)

        def look(*extra: str) -> tuple[dict[str, object], str]:
            args = [*status, "--url", router.url, *extra]
            doc = json.loads(subprocess.run([*args, "--json"], capture_output=True, text=True,
                                            env=env, timeout=60, check=False).stdout)
            text = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60,
                                  check=False).stdout
            return doc["servers"][0]["router"]["workers"][0], text

        alive, text = look()
        assert (alive["state"], alive["label"], alive["checked"]) == (
            "unchecked", "router: healthy, not checked", False)
        assert "router: healthy, not checked" in text and "0 of 1 workers can serve by our " \
            "own look; 1 healthy by the router's word, not checked" in text, text
        worker.kill()
        worker.wait_exit()
        killed, text = look()
        print(f"\nafter the worker was killed, status --url {router.url}:\n{text}")
        assert killed["state"] != "ready" and killed["label"] == "router: healthy, not checked"
        checked, text = look("--trust-router-workers")
        print(f"with --trust-router-workers:\n{text}")
        assert (checked["state"], checked["checked"]) == ("down", True)


def test_a_workers_row_in_the_fleet_is_never_ready_on_the_routers_word() -> None:
    from eagle_tui.core.sglang.router import NOT_CONTACTED, WorkerProbe, WorkerView
    from eagle_tui.tui.render.fleet import worker_row

    said = WorkerView("http://10.0.0.1:30000", True, True, 0, None,
                      WorkerProbe("unknown", NOT_CONTACTED))
    checked = WorkerView("http://10.0.0.1:30000", True, True, 0, None, WorkerProbe("healthy"))
    assert (said.state, said.label, said.checked) == (
        "unchecked", "router: healthy, not checked", False)
    row = worker_row(0, "router", said, None)
    assert (row.phase, row.tone) == ("unchecked", "busy")
    assert (worker_row(0, "router", checked, None).phase, checked.checked) == ("ready", True)

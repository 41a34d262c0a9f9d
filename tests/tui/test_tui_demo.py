"""``eagle-tui demo``: starts the simulated server and a detached batch, shows them, and
cleans up (server, worker, files, registry record)."""

from __future__ import annotations

import argparse

import psutil
from tui_fakes import wait_for

from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.health.phase import Phase
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.demo import demo_options, demo_sources, start_batch, start_demo, stop_demo
from eagle_tui.tui.widgets.server_card import ServerCard


def demo_args() -> argparse.Namespace:
    return argparse.Namespace(
        time_scale=0.0,
        prompts=20,
        tokens_per_s=0.0,
        theme="eagle-dark",
        no_mouse=False,
        keep=False,
        log_level="INFO",
    )


async def test_demo_runs_a_batch_on_the_sim_and_cleans_up() -> None:
    args = demo_args()
    demo = start_demo(args)
    pid = demo.server.pid
    try:
        app = EagleApp(demo_options(demo, args), sources=demo_sources(demo))
        start_batch(demo, app, args)
        async with app.run_test(size=(120, 40)) as pilot:
            card = app.screen.query_one(ServerCard)
            await wait_for(
                pilot,
                lambda: card.snapshot is not None and card.snapshot.phase == Phase.READY,
                120,
                "demo server ready",
            )
            assert app.screen.check_action("restart_server", ()) is True  # managed
            await wait_for(
                pilot,
                lambda: bool(demo.capture.batches()) and demo.capture.batches()[0].state == "done",
                120,
                "demo batch finished",
            )
            progress = demo.capture.batches()[0].progress
            assert progress is not None and progress.done == 20
    finally:
        stop_demo(demo, keep=False)
    assert Registry().all() == []  # the demo's record is gone with its files
    assert pid is not None
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not demo.workdir.exists()

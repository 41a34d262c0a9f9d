"""A server URL's user info is a credential: every verb and the dashboard accept it, send it
(httpx turns it into Basic auth) and never show it: not in their output, not in a file a
batch writes, not in the registry or a worker's log. Real processes against the simulated
server; the query-string half (always refused) is in ``test_urls.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.waiting import async_wait_until, wait_until

from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.tokenizer import bundled_tokenizer_path

pytestmark = pytest.mark.slow

SECRET = "sekrit-7f3"
USER = "eve-the-user"


def with_user_info(url: str) -> str:
    return url.replace("http://", f"http://{USER}:{SECRET}@", 1)


def assert_clean(text: str | bytes, where: str) -> None:
    data = text.encode() if isinstance(text, str) else text
    assert SECRET.encode() not in data and USER.encode() not in data, where


def assert_tree_clean(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            assert_clean(path.read_bytes(), str(path))


def eagle(state: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EAGLE_TUI_STATE_DIR": str(state)}
    env.pop("EAGLE_TUI_API_KEY", None)  # user info and a key together are refused
    done = subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", *argv], env=env,
                          capture_output=True, text=True, timeout=240)
    assert_clean(done.stdout + done.stderr, " ".join(argv))
    return done


def write_prompts(path: Path, count: int) -> None:
    path.write_text("".join(
        json.dumps({"id": f"p{i}", "messages": [{"role": "user", "content": f"hello {i}"}]}) + "\n"
        for i in range(count)))


def test_watch_and_status_show_the_public_url_only(sim_server: SimProcess,
                                                   tmp_path: Path) -> None:
    url = with_user_info(sim_server.url)
    watch = ("watch", "--url", url, "--url-only", "--no-history", "--timeout", "120")
    done = eagle(tmp_path, *watch)
    assert done.returncode == 0 and f"url {sim_server.url}" in done.stdout, done.stderr
    assert eagle(tmp_path, *watch, "--json").returncode == 0
    done = eagle(tmp_path, "status", "--url", url, "--router-metrics", url)
    assert done.returncode == 0 and f"server {sim_server.url}: ready" in done.stdout
    done = eagle(tmp_path, "status", "--url", url, "--json")
    assert [s["url"] for s in json.loads(done.stdout)["servers"]] == [sim_server.url]


def test_a_batch_and_every_verb_that_reads_it_never_show_user_info(
    sim_server: SimProcess, tmp_path: Path
) -> None:
    url, state = with_user_info(sim_server.url), tmp_path / "state"
    write_prompts(tmp_path / "p.jsonl", 6)
    common = ("--prompts", str(tmp_path / "p.jsonl"), "--server", url, "--tokenizer",
              str(bundled_tokenizer_path()), "--max-new-tokens", "8", "--display", "plain")
    out = tmp_path / "out"
    done = eagle(state, "capture", *common, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert Manifest.load(out).extra.servers == [sim_server.url]  # sent, and stored public

    detached = tmp_path / "detached"
    done = eagle(state, "capture", *common, "--out", str(detached), "--detach", "--name", "d")
    assert done.returncode == 0, done.stderr
    wait_until(lambda: (detached / "manifest.json").exists()
               and Manifest.load(detached).extra.state == "finished", 180, "the detached batch")
    listed = json.loads(eagle(state, "batches", "--json").stdout)
    assert [b["name"] for b in listed] == ["d"]
    assert eagle(state, "batches", "d").returncode == 0

    export = tmp_path / "train.parquet"
    for argv in (("inspect", str(out), "--index", "0"), ("stats", str(out)),
                 ("stats", str(detached), "--json"),
                 ("export", str(detached), "--format", "parquet", "--out", str(export))):
        done = eagle(state, *argv)
        assert done.returncode == 0, (argv, done.stderr)
    for root in (out, detached, state, export.parent):
        assert_tree_clean(root)


async def test_the_dashboard_shows_the_public_url_only(sim_server: SimProcess,
                                                       tmp_path: Path) -> None:
    from eagle_tui.core.health.phase import Phase
    from eagle_tui.tui.app import EagleApp
    from eagle_tui.tui.cli.main import build_parser
    from eagle_tui.tui.dashboard import TuiConfig, options_from
    from eagle_tui.tui.widgets.server_card import ServerCard

    argv = ["--url", with_user_info(sim_server.url)]
    options = options_from(build_parser(argv).parse_args(argv), TuiConfig(), {})
    app = EagleApp(options)
    async with app.run_test(size=(160, 50)) as pilot:
        card = app.screen.query_one(ServerCard)
        await async_wait_until(lambda: card.snapshot is not None
                               and card.snapshot.phase == Phase.READY, 60, "ready")
        await pilot.pause()
        screen = app.export_screenshot()
        assert sim_server.url in screen and card.target.label in screen
        assert_clean(screen, "the dashboard")

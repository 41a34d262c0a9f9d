"""A hostile router (issue 24 items 3 and 5), on real sockets: its ``/workers`` names other
addresses, ``file://``/``gopher://``/``unix://`` URLs, user info and query strings, or lists
20,000 workers. The API key and direct requests go only to URLs the user named unless
``--trust-router-workers`` is given; bad worker URLs never count as able to serve; what was
contacted is said; a huge list is capped (one line) and costs bounded memory."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fakerouter import FakeRouter, Spy, many_workers, run_measured
from test_e2e_support import ROOT, cli_env
from test_engine_fakes import rows_of, write_prompts

from eagle_tui.core.sglang.router import MAX_WORKERS
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.tokenizer import bundled_tokenizer_path

pytestmark = pytest.mark.slow

KEY = "sekrit-key-24"
RSS_LIMIT_MIB = 300.0
HUGE = 20_000


@pytest.fixture
def spy() -> Iterator[Spy]:
    with Spy() as spy:
        yield spy


def hostile_workers(spy: Spy) -> list[str]:
    return [f"{spy.url}/plain", f"http://user:pw@127.0.0.1:{spy.port}/creds",
            f"{spy.url}/q?q=1", "file:///etc/passwd", "gopher://127.0.0.1:70/", "unix:///tmp/s"]


def eagle(tmp_path: Path, verb: str, *args: str, timeout: float = 120.0) -> (
    tuple[int, str, str, float]
):
    env = cli_env({"EAGLE_TUI_API_KEY": KEY, "EAGLE_TUI_STATE_DIR": str(tmp_path / "state")})
    return run_measured([sys.executable, "-m", "eagle_tui.tui.cli", verb, *args], env=env,
                        cwd=str(ROOT), timeout=timeout, workdir=str(tmp_path))


def status(tmp_path: Path, router: FakeRouter, *extra: str) -> tuple[dict[str, object], str]:
    _, out, err, _ = eagle(tmp_path, "status", "--once", "--json", "--url", router.url,
                           *extra)
    assert "Traceback" not in err, err
    _, text, err, _ = eagle(tmp_path, "status", "--once", "--url", router.url, *extra)
    assert "Traceback" not in err, err
    [server] = json.loads(out)["servers"]
    return server["router"], text


def test_status_contacts_only_named_urls_and_refuses_bad_worker_urls(
        tmp_path: Path, spy: Spy) -> None:
    with FakeRouter(hostile_workers(spy)) as router:
        view, text = status(tmp_path, router)
    assert spy.seen == [], "nothing sent to an address the user did not name"
    assert set(router.keys) == {f"Bearer {KEY}"}  # the router is named: it gets the key
    states = {w["url"]: w["state"] for w in view["workers"]}  # type: ignore[index]
    # the router's word, not asked directly: labelled as the router's, never "ready"
    assert states[f"{spy.url}/plain"] == "unchecked"
    assert "router: healthy, not checked" in text
    bad = [w for w in view["workers"] if w["state"] == "invalid"]  # type: ignore[index]
    assert len(bad) == 5 and view["ready_workers"] == 0 and view["unchecked_workers"] == 1
    assert "user:pw" not in text + json.dumps(view) and "q=1" not in text
    assert "contacted: the router only" in text and "--trust-router-workers" in text


def test_trusting_the_workers_is_an_explicit_choice_and_said(
        tmp_path: Path, spy: Spy) -> None:
    with FakeRouter(hostile_workers(spy)) as router:
        view, text = status(tmp_path, router, "--trust-router-workers")
    assert spy.seen, "with --trust-router-workers the valid worker is asked"
    assert {path.split("/")[1] for path, _ in spy.seen} == {"plain"}, spy.seen
    assert {key for _, key in spy.seen} == {f"Bearer {KEY}"}  # never Basic auth
    assert f"contacted: {router.url}, {spy.url}/plain" in text
    assert view["contacted"] == [router.url, f"{spy.url}/plain"]
    assert "user:pw" not in text


def test_capture_through_a_hostile_router_sends_the_key_nowhere_else(
        tmp_path: Path, spy: Spy, sim_server: SimProcess) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", 30)
    with FakeRouter(hostile_workers(spy), sim_server.url) as router:
        code, out, err, _ = eagle(
            tmp_path, "capture", "--display", "plain", "--prompts", str(prompts),
            "--out", str(tmp_path / "out"), "--server", router.url,
            "--tokenizer", str(bundled_tokenizer_path()), "--max-new-tokens", "16",
            "--concurrency", "4")
    assert code == 0, err[-3000:]
    assert len(rows_of(tmp_path / "out")) == 30
    assert spy.seen == []
    assert f"note: contacted {router.url} only" in out + err


def test_a_20000_worker_list_is_capped_said_and_bounded(
        tmp_path: Path, spy: Spy, sim_server: SimProcess) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", 40)
    workers = many_workers(HUGE, sim_server.url, spy.url)
    with FakeRouter(workers, sim_server.url) as router:
        code, text, err, status_rss = eagle(tmp_path, "status", "--once", "--url", router.url,
                                            "--trust-router-workers")
        assert "Traceback" not in err and code in (0, 3), err[-2000:]
        assert f"the router lists {HUGE:,} workers; only the first {MAX_WORKERS}" in text
        assert len({p for p, _ in spy.seen}) <= 3 * MAX_WORKERS  # /health, /metrics, /server_info
        code, out, err, capture_rss = eagle(
            tmp_path, "capture", "--display", "plain", "--prompts", str(prompts),
            "--out", str(tmp_path / "out"), "--server", router.url,
            "--tokenizer", str(bundled_tokenizer_path()), "--max-new-tokens", "16",
            "--concurrency", "2", timeout=300)
    assert code == 0, err[-3000:]
    assert len(rows_of(tmp_path / "out")) == 40
    assert f"the router lists {HUGE:,} workers" in out + err
    print(f"peak RSS with {HUGE:,} workers listed: status --once {status_rss:.0f} MiB, "
          f"capture {capture_rss:.0f} MiB", file=sys.__stderr__)
    assert status_rss < RSS_LIMIT_MIB and capture_rss < RSS_LIMIT_MIB
    assert os.environ.get("EAGLE_TUI_API_KEY") != KEY  # the key stayed in the children

"""``core.accept`` against a live real SGLang 0.5.23 with NGRAM speculative decoding.

Starts its own server with ``scripts/realsglang/realsglang.sh start-spec`` (the CPU overlay,
``--enable-metrics --decode-log-interval 1``) on a free port and stops it at the end. Skipped
unless ``EAGLE_REAL_SGLANG_VENV`` is a venv with SGLang and ``EAGLE_REAL_SGLANG_MODEL`` the
script model (``scripts/realsglang/realsglang.sh install`` and ``model script`` make both).
Start-up takes minutes on a CPU (the first one on a machine compiles SGLang's n-gram corpus).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from accept_recorded import series_value

from eagle_tui.core.accept.config import lifetime_figure, spec_config
from eagle_tui.core.accept.decodelog import log_figure, points_from_log
from eagle_tui.core.accept.requests import request_acceptance
from eagle_tui.core.accept.summary import ReplayedRequest, report
from eagle_tui.core.accept.window import (
    GENERATION_TOKENS,
    VERIFY_CALLS,
    MetricsWindow,
    scrape_sample,
)
from eagle_tui.core.sglang.client import SGLangClient
from eagle_tui.core.sglang.types import GenerateRequest, SamplingParams
from eagle_tui.core.urls import ServerURL

VENV = os.environ.get("EAGLE_REAL_SGLANG_VENV")
MODEL = os.environ.get("EAGLE_REAL_SGLANG_MODEL")
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "realsglang" / "realsglang.sh"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.realsglang,
    pytest.mark.skipif(
        not (VENV and MODEL), reason="set EAGLE_REAL_SGLANG_VENV and EAGLE_REAL_SGLANG_MODEL"
    ),
]

CHAT = [1, 936, 201, 300, 400, 2, 201, 1, 300, 85, 927, 201]  # ends in "\n": 9-token answer


@dataclass(frozen=True)
class Server:
    url: str
    log: Path


def free_port() -> int:
    """A port the OS says is free now (SGLang binds it a few seconds later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def ngram_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("ngram") / "server.log"
    port = free_port()
    env = {**os.environ, "REALSGLANG_VENV": str(VENV), "REALSGLANG_PORT": str(port),
           "REALSGLANG_LOG": str(log), "REALSGLANG_START_TIMEOUT": "1500"}
    start = [str(SCRIPT), "start-spec", str(MODEL), "--enable-metrics",
             "--decode-log-interval", "1"]
    started = subprocess.run(start, env=env, capture_output=True, text=True, timeout=1600)
    try:
        assert started.returncode == 0, started.stderr
        yield Server(f"http://127.0.0.1:{port}", log)
    finally:
        subprocess.run([str(SCRIPT), "stop"], env=env, capture_output=True, timeout=120)


def prompts(model: Path) -> list[tuple[str, list[int], int]]:
    """(category, input ids, max_new_tokens): chat answers and walks on the script's
    successor table (the 9-token answer is on its cycle with EOS)."""
    succ = json.loads((model / "script.json").read_text())["succ"]
    walk = [CHAT[-1]]
    for _ in range(40):
        walk.append(succ[walk[-1]])
    tails = [walk[5], walk[20], walk[5]]  # mid-answer, past it, and the first again
    return [("chat", [*CHAT[:3], 310 + i, *CHAT[4:]], 32) for i in range(3)] + [
        ("walk", [*CHAT[:3], 600 + i, tail], 48) for i, tail in enumerate(tails)
    ]


async def replay(url: str) -> list[tuple[str, dict[str, Any], list[int]]]:
    """Each prompt once, in turn, through eagle-tui's own client: (category, meta_info,
    output ids) as SGLang sent them."""
    answers = []
    async with SGLangClient(ServerURL.parse(url)) as client:
        for category, ids, limit in prompts(Path(str(MODEL))):
            request = GenerateRequest(ids, SamplingParams(max_new_tokens=limit, temperature=0.0))
            result = await client.generate(request)
            answers.append((category, dict(result.meta), list(result.output_ids)))
    return answers


def scrape(url: str) -> str:
    response = httpx.get(f"{url}/metrics", timeout=30)
    response.raise_for_status()
    return response.text


def server_info(url: str) -> dict[str, Any]:
    response = httpx.get(f"{url}/server_info", timeout=30)
    response.raise_for_status()
    info: dict[str, Any] = response.json()
    return info


async def test_the_windowed_figure_is_the_delta_of_the_servers_own_counters(
        ngram_server: Server) -> None:
    before = scrape(ngram_server.url)
    answers = await replay(ngram_server.url)
    after = scrape(ngram_server.url)
    window = MetricsWindow(3600.0)
    for at, text in enumerate((before, after)):
        sample = scrape_sample(text, float(at))
        assert sample is not None
        window.add(sample)
    figure = window.figure(draft_tokens=spec_config(server_info(ngram_server.url)).num_draft_tokens)
    tokens = [series_value(t, GENERATION_TOKENS) or 0.0 for t in (before, after)]
    verifies = [series_value(t, VERIFY_CALLS) or 0.0 for t in (before, after)]
    delta_tokens, delta_verify = tokens[1] - tokens[0], verifies[1] - verifies[0]
    assert figure is not None and figure.source == "metrics"
    assert figure.accept_length == pytest.approx(delta_tokens / delta_verify, rel=1e-12)
    completion = sum(meta["completion_tokens"] for _, meta, _ in answers)
    verify = sum(meta["spec_verify_ct"] for _, meta, _ in answers)
    assert (delta_tokens, delta_verify) == (completion, verify)


async def test_per_category_figures_are_sums_of_the_servers_own_meta_info(
        ngram_server: Server) -> None:
    answers = await replay(ngram_server.url)
    replayed = [ReplayedRequest(f"{i}", category, request_acceptance(meta), tuple(ids))
                for i, (category, meta, ids) in enumerate(answers)]
    result = report(replayed)
    for name in ("chat", "walk"):
        metas = [meta for category, meta, _ in answers if category == name]
        expected = (sum(m["completion_tokens"] for m in metas)
                    / sum(m["spec_verify_ct"] for m in metas))
        assert result.categories[name].accept_length == pytest.approx(expected, rel=1e-12)
        assert result.categories[name].mean_accept_length == pytest.approx(
            sum(m["spec_accept_length"] for m in metas) / len(metas))
    assert result.categories["chat"].accept_length > 1.5  # NGRAM had seen the answer


async def test_the_lifetime_figure_is_server_infos_and_the_log_figure_its_own_lines(
        ngram_server: Server) -> None:
    offset = ngram_server.log.stat().st_size
    answers = await replay(ngram_server.url)
    info = server_info(ngram_server.url)
    lifetime = lifetime_figure(info)
    assert lifetime is not None
    assert lifetime.accept_length == info["internal_states"][0]["avg_spec_accept_length"]
    assert spec_config(info).algorithm == "NGRAM"
    with open(ngram_server.log, "rb") as handle:
        handle.seek(offset)
        lines = handle.read().decode("utf-8", "replace").splitlines()
    figure = log_figure(points_from_log(lines))
    verify = sum(meta["spec_verify_ct"] for _, meta, _ in answers)
    correct = sum(meta["spec_num_correct_drafts"] for _, meta, _ in answers)
    assert figure is not None
    assert figure.accept_length == pytest.approx((verify + correct) / verify, rel=1e-9)
    flushed = httpx.post(f"{ngram_server.url}/flush_cache", timeout=30)
    assert flushed.status_code == 200
    assert lifetime_figure(server_info(ngram_server.url)) is None


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    root = Path(__file__).resolve().parents[2]
    return subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", *args], cwd=root,
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(root)})


def test_the_accept_verb_reports_what_the_servers_counters_counted(
        ngram_server: Server, tmp_path: Path) -> None:
    """``accept`` replays a prompt file through the chat template of the script model; its
    sums are exactly what SGLang's own counters counted over the replay, and each category's
    figure is Σcompletion/Σverify of its answers."""
    prompts = tmp_path / "prompts.jsonl"
    records = [{"id": f"{kind}{i}", "category": kind, "messages": [
        {"role": "user", "content": text}]}
        for i, (kind, text) in enumerate([("hello", "hello"), ("hello", "hello there"),
                                          ("numbers", "1 2 3 4"), ("numbers", "5 6 7 8")])]
    prompts.write_text("".join(json.dumps(r) + "\n" for r in records))
    before = scrape(ngram_server.url)
    done = run_cli("accept", "--prompts", str(prompts), "--server", ngram_server.url,
                   "--tokenizer", str(MODEL), "--max-new-tokens", "32", "--concurrency", "1",
                   "--no-store", "--json")
    after = scrape(ngram_server.url)
    assert done.returncode in (0, 1), done.stderr
    out = json.loads(done.stdout)
    assert out["failures"] == [] and out["spec"]["algorithm"] == "NGRAM"
    grown = [(series_value(after, name) or 0.0) - (series_value(before, name) or 0.0)
             for name in (GENERATION_TOKENS, VERIFY_CALLS)]
    overall = out["overall"]
    assert (overall["completion_tokens"], overall["verify_steps"]) == tuple(grown)
    for figures in out["categories"].values():
        assert figures["n"] == 2
        assert figures["accept_length"] == pytest.approx(
            figures["completion_tokens"] / figures["verify_steps"], rel=1e-12)


def test_status_shows_the_counters_figure_and_server_info_config(
        ngram_server: Server, tmp_path: Path) -> None:
    text = scrape(ngram_server.url)
    done = run_cli("status", "--once", "--json", "--url", ngram_server.url)
    entry = json.loads(done.stdout)["servers"][0]["acceptance"]
    assert entry["config"]["algorithm"] == "NGRAM"
    figure = entry["figure"]
    assert (figure["source"], figure["window"]) == ("metrics", "since start")
    assert figure["accept_length"] == pytest.approx(
        (series_value(text, GENERATION_TOKENS) or 0.0) / (series_value(text, VERIFY_CALLS)
                                                           or 1.0), rel=1e-12)

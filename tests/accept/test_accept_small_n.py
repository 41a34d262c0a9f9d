"""Issue 39 item 13, as reproduced: ``accept --against`` with one request per category
printed a zero-width "95 % interval" and "supported" (every resample of one request is that
request). Now below the minimum n a difference has no interval and no verdict, and the line
says the n needed. Real processes: two simulated speculative servers, the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eagle_tui.core.accept.ab import MIN_REQUESTS
from eagle_tui.core.sim.args import BUNDLED_MODEL_DIR
from eagle_tui.core.sim.launcher import SimProcess

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FAST = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0")
SPEC = ("--speculative-algorithm", "EAGLE3")


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str]]:
    with SimProcess([*FAST, *SPEC]) as a, \
            SimProcess([*FAST, *SPEC, "--sim-draft-acceptance", "0.95"]) as b:
        a.wait_ready(timeout=60)
        b.wait_ready(timeout=60)
        yield a.url, b.url


def ab(servers: tuple[str, str], prompts: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eagle_tui.tui.cli", "accept", "--prompts", str(prompts),
         "--server", servers[0], "--against", servers[1], "--tokenizer",
         str(BUNDLED_MODEL_DIR), "--max-new-tokens", "64", "--no-store", *extra],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
        env={**os.environ, "NO_COLOR": "1"})


def one_per_category(path: Path) -> Path:
    path.write_text("".join(json.dumps({"id": f"q{i}", "category": name, "messages": [
        {"role": "user", "content": f"{name} question {i}"}]}) + "\n"
        for i, name in enumerate(("mtbench", "gsm8k", "humaneval"))))
    return path


def test_one_request_per_category_gives_no_interval_and_no_verdict(
        servers: tuple[str, str], tmp_path: Path) -> None:
    prompts = one_per_category(tmp_path / "p.jsonl")
    text = ab(servers, prompts)
    assert text.returncode == 0, text.stderr
    lines = [line for line in text.stdout.splitlines() if line.startswith("  ")
             and "->" in line]
    assert len(lines) == 3, text.stdout  # one per category
    for line in lines:
        assert (f"no interval: n = 1 and 1, an interval needs at least {MIN_REQUESTS} "
                "requests per side") in line, line
        assert "supported" not in line and "not significant" not in line
    doc = json.loads(ab(servers, prompts, "--json").stdout)
    for difference in doc["differences"].values():
        assert difference["low"] is None and difference["high"] is None
        assert (difference["a_n"], difference["b_n"]) == (1, 1)
        assert difference["resamples"] == 0 and difference["min_requests"] == MIN_REQUESTS

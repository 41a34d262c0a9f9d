"""docs/walkthrough.md as a new user follows it: its commands, on the shipped
examples/prompts.jsonl, against the simulated server (a real process on an OS port), with
the tokenizer the server names in /get_model_info; capture, stats, inspect and both exports
exit 0 and say what the walkthrough shows."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest

from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.tui.cli.main import VERBS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ROOT / "examples" / "prompts.jsonl"
WALKTHROUGH = ROOT / "docs" / "walkthrough.md"


def eagle(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_the_walkthrough_names_only_real_verbs_and_the_shipped_prompts() -> None:
    text = WALKTHROUGH.read_text(encoding="utf-8")
    used = set(re.findall(r"^eagle-tui (\w+)", text, re.MULTILINE))
    assert used <= set(VERBS) and {"demo", "sim", "watch", "capture", "stats", "inspect",
                                    "export"} <= used
    assert "examples/prompts.jsonl" in text
    records = [json.loads(line) for line in PROMPTS.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 20 and len({r["id"] for r in records}) == 20


def test_the_walkthrough_runs_on_the_shipped_prompts(tmp_path: Path) -> None:
    with SimProcess(["--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0"]) as sim:
        sim.wait_ready(60)
        info = httpx.get(f"{sim.url}/get_model_info", timeout=10).json()
        tokenizer = info["tokenizer_path"]
        done = eagle("capture", "--prompts", str(PROMPTS), "--out", "runs/first", "--server",
                     sim.url, "--tokenizer", tokenizer, "--max-new-tokens", "256",
                     "--concurrency", "8", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rows saved this run   20" in done.stderr and "prompts rejected      0" in done.stderr

    stats = eagle("stats", "runs/first", cwd=tmp_path)
    assert stats.returncode == 0 and "export would keep 20 of 20" in stats.stdout
    inspect = eagle("inspect", "runs/first", "--id", "p001", cwd=tmp_path)
    assert inspect.returncode == 0 and "Explain binary search" in inspect.stdout

    (tmp_path / "data").mkdir()
    for fmt, name in (("speculators", "first.jsonl"), ("parquet", "first.parquet")):
        out = eagle("export", "runs/first", "--format", fmt, "--out", f"data/{name}",
                    cwd=tmp_path)
        assert out.returncode == 0 and "kept 20 of 20" in out.stdout, out.stderr
    assert len((tmp_path / "data" / "first.jsonl").read_text().splitlines()) == 20
    assert pq.read_table(tmp_path / "data" / "first.parquet").num_rows == 20

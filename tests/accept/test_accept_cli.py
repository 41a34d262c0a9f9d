"""``eagle-tui accept`` against simulated speculative servers (real processes, real sockets):
per-category figures equal to the servers' own answers, A/B intervals, the 1.00 alarm,
degenerate outputs, stored results and their comparison, the held-out split end to end
(capture -> export leaves it out -> accept --from-batch replays exactly it), bad flags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest

from eagle_tui.core.accept.heldout import held_out_ids, is_held_out
from eagle_tui.core.accept.stored import prompt_set_id
from eagle_tui.core.capture.prompts import PromptRecord, open_prompts
from eagle_tui.core.sim.args import BUNDLED_MODEL_DIR
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.tokenizer import load_tokenizer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = str(BUNDLED_MODEL_DIR)
FAST = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0", "--enable-metrics")
SPEC = ("--speculative-algorithm", "EAGLE3")
CATEGORIES = ("mtbench", "gsm8k", "tools")
TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


def write_prompts(path: Path, count: int, *, prefix: str = "q") -> Path:
    lines = []
    for i in range(count):
        category = CATEGORIES[i % 3]
        record: dict[str, Any] = {"id": f"{prefix}{i}", "category": category, "messages": [
            {"role": "user", "content": f"{category} question {i}"}]}
        if category == "tools":
            record["tools"] = [TOOL]
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    return path


def cli(*args: str, timeout: float = 240.0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", *args],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout)


def accept(*args: str) -> tuple[int, dict[str, Any]]:
    done = cli("accept", "--tokenizer", TOKENIZER, "--max-new-tokens", "160", "--json", *args)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[SimProcess, SimProcess]]:
    with SimProcess([*FAST, *SPEC]) as a, \
            SimProcess([*FAST, *SPEC, "--sim-draft-acceptance", "0.95"]) as b:
        a.wait_ready(timeout=60)
        b.wait_ready(timeout=60)
        yield a, b


@pytest.fixture(scope="module")
def prompts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_prompts(tmp_path_factory.mktemp("accept") / "prompts.jsonl", 18)


def own_answers(server: SimProcess, prompts: Path) -> dict[str, list[dict[str, Any]]]:
    """Each prompt rendered here and sent straight to ``/generate``: the server's own
    ``meta_info`` per category."""
    tokenizer = load_tokenizer(TOKENIZER)
    stop = tokenizer.boundary_ids().stop
    metas: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in open_prompts(prompts):
        assert isinstance(record, PromptRecord)
        ids = tokenizer.render(record.messages, record.tools)
        answer = httpx.post(f"{server.url}/generate", timeout=30, json={
            "input_ids": ids, "sampling_params": {
                "max_new_tokens": 160, "temperature": 0.0, "stop_token_ids": list(stop)}})
        metas[record.category or ""].append(answer.json()["meta_info"])
    return metas


def test_per_category_figures_are_the_servers_own(servers: tuple[SimProcess, SimProcess],
                                                  prompts: Path) -> None:
    a, _ = servers
    code, out = accept("--prompts", str(prompts), "--server", a.url, "--no-store")
    assert code == 0 and out["failures"] == [] and out["alarms"] == []
    assert out["spec"]["algorithm"] == "EAGLE3" and out["overall"]["n"] == 18
    metas = own_answers(a, prompts)
    assert sorted(out["categories"]) == sorted(CATEGORIES)
    for category, answers in metas.items():
        figures = out["categories"][category]
        assert figures["n"] == len(answers) == 6
        expected = (sum(m["completion_tokens"] for m in answers)
                    / sum(m["spec_verify_ct"] for m in answers))
        assert figures["accept_length"] == pytest.approx(expected, rel=1e-12)
        mean = sum(m["spec_accept_length"] for m in answers) / len(answers)
        assert figures["mean_accept_length"] == pytest.approx(mean, rel=1e-12)
        assert len(figures["per_position"]) == 3
    # the sim drafts tool calls more easily than prose: the category shows it
    assert out["categories"]["tools"]["accept_length"] > out["categories"]["mtbench"][
        "accept_length"]


def test_an_ab_gives_intervals_that_see_a_better_drafter_and_not_a_same_one(
        servers: tuple[SimProcess, SimProcess], prompts: Path) -> None:
    a, b = servers
    _, better = accept("--prompts", str(prompts), "--server", a.url, "--against", b.url,
                       "--no-store")
    assert better["against"]["overall"]["n"] == 18
    for category in CATEGORIES:
        difference = better["differences"][category]
        assert difference["paired"] and difference["resamples"] == 2000
        assert 0 < difference["low"] <= difference["difference"] <= difference["high"]
        assert difference["difference"] == pytest.approx(
            better["against"]["categories"][category]["accept_length"]
            - better["categories"][category]["accept_length"])
    _, same = accept("--prompts", str(prompts), "--server", a.url, "--against", a.url,
                     "--no-store")
    for category in CATEGORIES:
        difference = same["differences"][category]
        assert difference["low"] <= 0 <= difference["high"]
    text = cli("accept", "--tokenizer", TOKENIZER, "--max-new-tokens", "160", "--prompts",
               str(prompts), "--server", a.url, "--against", b.url, "--no-store")
    assert "B - A" in text.stdout and "supported" in text.stdout and "(paired)" in text.stdout


def test_an_eagle3_draft_under_eagle_raises_the_one_alarm(tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", 6)
    with SimProcess([*FAST, "--speculative-algorithm", "EAGLE",
                     "--speculative-draft-model-path", "/m/kimi-k2.5-eagle3"]) as sim:
        sim.wait_ready(timeout=60)
        code, out = accept("--prompts", str(prompts), "--server", sim.url, "--no-store")
    assert code == 1
    assert out["overall"]["accept_rate"] == 0.0
    assert [a["kind"] for a in out["alarms"]] == ["stuck_at_one"]
    assert "--speculative-algorithm" in out["alarms"][0]["next_step"]


def test_degenerate_outputs_are_counted_and_left_out_of_a_second_figure(
        servers: tuple[SimProcess, SimProcess], tmp_path: Path) -> None:
    a, _ = servers
    prompts = write_prompts(tmp_path / "many.jsonl", 48, prefix="loop")
    _, out = accept("--prompts", str(prompts), "--server", a.url, "--no-store",
                    "--max-new-tokens", "400")
    overall = out["overall"]
    assert overall["degenerate"] >= 1  # one prompt in 12 runs away into a loop
    assert overall["degenerate_share"] == pytest.approx(overall["degenerate"] / 48)
    assert overall["accept_length_without_degenerate"] < overall["accept_length"]


def test_results_are_stored_and_a_fall_raises_the_alarm(
        servers: tuple[SimProcess, SimProcess], tmp_path: Path) -> None:
    a, b = servers
    prompts = write_prompts(tmp_path / "p.jsonl", 12)
    code, first = accept("--prompts", str(prompts), "--server", b.url, "--label", "good")
    assert code == 0 and first["comparison"] is None
    assert first["stored_in"] == str(tmp_path / "accept-results.jsonl")
    code, second = accept("--prompts", str(prompts), "--server", a.url, "--label", "worse")
    assert code == 1
    comparison = second["comparison"]
    assert comparison["previous_label"] == "good"
    overall = comparison["changes"][0]
    assert overall["category"] == "overall" and overall["change"] < -0.1
    assert "fell" in {alarm["kind"] for alarm in second["alarms"]}
    stored = (tmp_path / "accept-results.jsonl").read_text().splitlines()
    assert len(stored) == 2 and json.loads(stored[1])["label"] == "worse"


def test_the_held_out_split_is_captured_kept_out_of_export_and_replayed(
        servers: tuple[SimProcess, SimProcess], tmp_path: Path) -> None:
    a, _ = servers
    prompts = write_prompts(tmp_path / "p.jsonl", 30, prefix="h")
    batch = tmp_path / "batch"
    done = cli("capture", "--display", "plain", "--prompts", str(prompts), "--out", str(batch),
               "--server", a.url, "--tokenizer", TOKENIZER, "--max-new-tokens", "64",
               "--held-out", "0.3")
    assert done.returncode == 0, done.stderr
    ids = [f"h{i}" for i in range(30)]
    held = held_out_ids(ids, 0.3)
    assert 0 < len(held) < 30
    out = tmp_path / "train.parquet"
    assert cli("export", str(batch), "--format", "parquet", "--out", str(out)).returncode == 0
    exported = set(pq.read_table(out, columns=["sample_id"]).column("sample_id").to_pylist())
    assert exported == set(ids) - held and not any(is_held_out(i, 0.3) for i in exported)
    everything = tmp_path / "all.parquet"
    assert cli("export", str(batch), "--format", "parquet", "--out", str(everything),
               "--include-held-out").returncode == 0
    assert pq.read_metadata(everything).num_rows == 30
    stats = cli("stats", str(batch), "--json")
    assert stats.returncode == 0, stats.stderr + stats.stdout[:2000]
    assert json.loads(stats.stdout)["export"]["dropped"].get("held_out") == len(held)
    code, replayed = accept("--from-batch", str(batch), "--server", a.url)
    assert code == 0 and replayed["held_out"] is True
    assert replayed["overall"]["n"] == len(held)
    assert replayed["prompt_set"] == prompt_set_id(held)
    assert (batch / "accept-results.jsonl").exists()


@pytest.mark.parametrize(("args", "says"), [
    (("--prompts", "p.jsonl", "--server", "http://127.0.0.1:9"), "--tokenizer"),
    (("--prompts", "p.jsonl", "--server", "http://127.0.0.1:9", "--tokenizer", TOKENIZER,
      "--concurrency", "0"), "--concurrency"),
    (("--prompts", "p.jsonl", "--server", "http://127.0.0.1:9", "--tokenizer", TOKENIZER,
      "--temperature", "hot"), "--temperature"),
    (("--server", "http://127.0.0.1:9", "--tokenizer", TOKENIZER), "--prompts"),
    (("--prompts", "missing.jsonl", "--server", "http://127.0.0.1:9", "--tokenizer",
      TOKENIZER), "does not exist"),
    (("--prompts", "p.jsonl", "--server", "not a url", "--tokenizer", TOKENIZER), "--server"),
])
def test_a_bad_flag_is_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...],
                                           says: str) -> None:
    write_prompts(tmp_path / "p.jsonl", 3)
    fixed = [str(tmp_path / a) if a.endswith(".jsonl") else a for a in args]
    done = cli("accept", *fixed)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert says in done.stderr.strip().splitlines()[-1]  # the error line (after argparse's usage)


def test_a_batch_without_a_split_and_a_bad_fraction_are_refused(tmp_path: Path) -> None:
    done = cli("capture", "--prompts", str(write_prompts(tmp_path / "p.jsonl", 3)), "--out",
               str(tmp_path / "b"), "--server", "http://127.0.0.1:9", "--tokenizer",
               TOKENIZER, "--held-out", "1.5")
    assert done.returncode == 2 and "--held-out" in done.stderr
    assert "Traceback" not in done.stderr
    done = cli("accept", "--from-batch", str(tmp_path), "--server", "http://127.0.0.1:9")
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_a_server_that_does_not_answer_is_refused_before_anything_is_sent(
        tmp_path: Path) -> None:
    done = cli("accept", "--prompts", str(write_prompts(tmp_path / "p.jsonl", 3)),
               "--server", "http://127.0.0.1:9", "--tokenizer", TOKENIZER)
    assert done.returncode == 2 and "does not answer /server_info" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1

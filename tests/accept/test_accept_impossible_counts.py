"""Issue 39 item 12, as reproduced: a proxy in front of a real simulated server rewrites what
its answers claim (``tests/support/meta_proxy.py``). ``accept`` believed any counts: one
answer claiming 10^15 proposed drafts in one verify step built a 10^15-long per-position list
(13.3 GB in 120 s); completion 0 or 2^62, correct > proposed, verify > completion, verify
10^400 were stored as results and compared later; capture stored 2^31-1 proposed drafts,
after which ``inspect`` of the row reached 6.9 GB; ``status`` printed a live accept length of
1e308 as 309 digits, and -3.00. Now the counts are checked against each other, the ids
received and the server's draft config: ``accept`` refuses the server in one line (exit 2,
nothing stored), capture stores the row without acceptance, a stored row or result with
impossible counts reads as such, and ``status`` shows an impossible live figure as invalid.
Peak memory is the real process's, from ``wait4`` (tests/support/peak_rss.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from eagle_tui.core.accept.config import SpecConfig
from eagle_tui.core.accept.figures import AcceptFigure
from eagle_tui.core.accept.live import live_from_figures
from eagle_tui.core.accept.requests import (
    RequestAcceptance,
    count_problem,
    request_acceptance,
    stored_acceptance,
)
from eagle_tui.core.accept.stored import load_results
from eagle_tui.core.capture.rows import column_counts
from eagle_tui.core.errors import AcceptResultError
from eagle_tui.core.sampling import SamplingIdentity, SamplingPreset
from eagle_tui.core.shards.manifest import BatchConfig, Manifest
from eagle_tui.core.shards.reader import ShardReader
from eagle_tui.core.shards.schema import ShardMetadata, ShardRow
from eagle_tui.core.shards.writer import ShardWriter
from eagle_tui.core.sim.args import BUNDLED_MODEL_DIR
from eagle_tui.core.sim.launcher import SimProcess

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "tests" / "support"
TOKENIZER = str(BUNDLED_MODEL_DIR)
FAST = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0")
SPEC = ("--speculative-algorithm", "EAGLE3")  # 4 draft tokens: 3 drafts per verify step
RSS_LIMIT_MIB = 300

# what a real answer of 9 tokens with 3 verify steps (3 drafts a step) may claim
REAL = {"completion_tokens": 9, "spec_verify_ct": 3, "spec_num_correct_drafts": 5,
        "spec_num_proposed_drafts": 9, "spec_correct_drafts_histogram": [0, 1, 2]}

HOSTILE: dict[str, tuple[dict[str, Any], str]] = {
    "10^15 proposed in one step": (
        {"spec_num_proposed_drafts": 10**15, "spec_verify_ct": 1},
        "spec_num_proposed_drafts 1,000,000,000,000,000 is more than any answer holds"),
    "completion 0": ({"completion_tokens": 0}, "completion_tokens 0 for"),
    "completion 2^62": ({"completion_tokens": 2**62},
                        "completion_tokens 4,611,686,018,427,387,904 is"),
    "correct > proposed": ({"spec_num_correct_drafts": 10_000},
                           "spec_num_correct_drafts 10,000 is more than spec_num_proposed_drafts"),
    "verify > completion": ({"spec_verify_ct": 10**6}, "spec_verify_ct 1,000,000 is more than"),
    "verify 10^400": ({"spec_verify_ct": 10**400},
                      "spec_verify_ct a number of ~401 digits is more than any answer holds"),
}


# -- the rule, one answer at a time -----------------------------------------------------------


def test_a_real_answer_is_believed() -> None:
    acceptance = request_acceptance(REAL, draft_tokens=4, output_tokens=9)
    assert acceptance.per_position == (1.0, 2 / 3, 0.0)


@pytest.mark.parametrize("case", list(HOSTILE))
def test_each_impossible_answer_is_refused_with_the_count_named(case: str) -> None:
    change, reason = HOSTILE[case]
    meta = {**REAL, **change}
    with pytest.raises(ValueError, match="impossible acceptance counts") as refused:
        request_acceptance(meta, draft_tokens=4, output_tokens=9)
    assert reason in str(refused.value)
    assert len(str(refused.value)) < 300


def test_drafts_per_step_are_bounded_by_the_servers_config() -> None:
    four = {**REAL, "spec_num_proposed_drafts": 15, "spec_num_correct_drafts": 5}  # 5 a step
    with pytest.raises(ValueError, match="more than the server's 4 draft tokens allow"):
        request_acceptance(four, draft_tokens=4)
    assert request_acceptance(four, draft_tokens=8).drafts_per_step == 5


def test_a_stored_row_with_impossible_counts_reads_as_such() -> None:
    """What capture stored before: 2^31-1 proposed drafts in one verify step; the row's
    per-position figures would have been a list of 2^31-1 floats."""
    stored = {"completion_tokens": 9, "verify_steps": 1, "correct_drafts": 1,
              "proposed_drafts": (1 << 31) - 1, "histogram": [0, 1]}
    with pytest.raises(ValueError, match="stored acceptance counts are impossible"):
        stored_acceptance(stored)
    assert count_problem(RequestAcceptance(9, 3, 5, 9, (0, 1, 2))) is None


def test_a_stored_result_with_impossible_figures_is_refused(tmp_path: Path) -> None:
    """A results file written before the check: accept length 0.00 (completion 0, verify 3)
    was compared later as "0.00 -> 2.05"."""
    summary = {"n": 1, "completion_tokens": 0, "verify_steps": 3, "accept_length": 0.0,
               "mean_accept_length": 0.0, "accept_rate": None, "per_position": [],
               "output_tokens_per_s": None, "degenerate": 0, "degenerate_share": 0.0,
               "accept_length_without_degenerate": 0.0}
    result = {"key": {"target": "t", "spec": {}, "prompt_set": "sha256:0", "temperature": 0.0,
                      "max_new_tokens": 8}, "server": "http://x", "created_at": "now",
              "report": {"overall": summary, "categories": {"c": summary}}}
    path = tmp_path / "accept-results.jsonl"
    path.write_text(json.dumps(result) + "\n")
    with pytest.raises(AcceptResultError, match=r"accept-results.jsonl:1: .*impossible figures "
                       r"\(overall: 3 verify steps for 0 completion tokens"):
        load_results(path)


@pytest.mark.parametrize("value", [1e308, -3.0, float("nan"), 9.0])
def test_an_impossible_live_figure_is_invalid_never_shown(value: float) -> None:
    info = {"speculative_algorithm": "EAGLE3", "speculative_num_draft_tokens": 4}
    lifetime = AcceptFigure(accept_length=value, source="lifetime", window="lifetime")
    live = live_from_figures(info, lifetime)
    assert live.figure is None and live.alarm is None
    assert live.invalid is not None and live.invalid.startswith("invalid: ")
    assert "tokens per verify step (lifetime, lifetime) is impossible" in live.invalid
    assert len(live.invalid) < 120
    good = AcceptFigure(accept_length=2.5, source="decode_log", window="last 60 s")
    both = live_from_figures(info, good, lifetime)
    assert both.figure == good and both.invalid is not None
    assert SpecConfig(num_draft_tokens=4).num_draft_tokens == 4


# -- the real processes, through the rewriting proxy ------------------------------------------


@contextmanager
def proxy(upstream: str, rewrite: dict[str, Any]) -> Iterator[str]:
    """``tests/support/meta_proxy.py`` in front of ``upstream``; its URL."""
    sys.set_int_max_str_digits(0)
    process = subprocess.Popen([sys.executable, str(SUPPORT / "meta_proxy.py"), upstream,
                                json.dumps(rewrite)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        ready = process.stdout.readline().split()
        assert ready and ready[0] == "READY", ready
        yield f"http://127.0.0.1:{ready[1]}"
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    with SimProcess([*FAST, *SPEC]) as server:
        server.wait_ready(timeout=60)
        yield server


def measured(argv: list[str], cwd: Path, timeout: float = 120) -> tuple[int, str, str, float]:
    """(exit status, stdout, stderr, peak RSS in MiB) of ``eagle-tui ARGV``."""
    rss = cwd / "rss.txt"
    done = subprocess.run([sys.executable, str(SUPPORT / "peak_rss.py"), str(rss),
                           str(timeout), "--", sys.executable, "-m", "eagle_tui.tui.cli",
                           *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout + 30, env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin",
                                                     "HOME": str(cwd)})
    return done.returncode, done.stdout, done.stderr, int(rss.read_text()) / 1024


def prompts(path: Path, count: int = 6) -> Path:
    path.write_text("".join(json.dumps({"id": f"q{i}", "category": "chat", "messages": [
        {"role": "user", "content": f"question {i}"}]}) + "\n" for i in range(count)))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("case", list(HOSTILE))
def test_accept_refuses_a_server_claiming_impossible_counts(
        sim: SimProcess, tmp_path: Path, case: str) -> None:
    change, reason = HOSTILE[case]
    results = tmp_path / "results.jsonl"
    with proxy(sim.url, {"meta_info": change}) as url:
        code, out, err, peak = measured([
            "accept", "--prompts", str(prompts(tmp_path / "p.jsonl")), "--server", url,
            "--tokenizer", TOKENIZER, "--max-new-tokens", "32", "--results", str(results)],
            tmp_path)
    print(f"{case}: exit {code}, peak RSS {peak:.0f} MiB")
    assert code == 2 and out == "", (out, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "impossible acceptance counts" in err and reason in err, err
    assert "nothing was measured or stored" in err
    assert not results.exists()
    assert peak < RSS_LIMIT_MIB


@pytest.mark.slow
def test_accept_through_a_proxy_that_changes_nothing_still_measures(
        sim: SimProcess, tmp_path: Path) -> None:
    """The control: the same proxy rewriting nothing, so the refusals above are the
    counts' doing."""
    results = tmp_path / "results.jsonl"
    with proxy(sim.url, {"meta_info": {}}) as url:
        code, out, err, _ = measured([
            "accept", "--prompts", str(prompts(tmp_path / "p.jsonl")), "--server", url,
            "--tokenizer", TOKENIZER, "--max-new-tokens", "32", "--results", str(results)],
            tmp_path)
    assert code == 0, err
    assert "overall" in out and results.exists()


@pytest.mark.slow
def test_capture_stores_the_row_but_never_the_impossible_counts(
        sim: SimProcess, tmp_path: Path) -> None:
    """Capture stored 2^31-1 proposed drafts; ``inspect`` of that row then reached 6.9 GB."""
    out = tmp_path / "batch"
    change = {"spec_num_proposed_drafts": (1 << 31) - 1, "spec_verify_ct": 1}
    with proxy(sim.url, {"meta_info": change}) as url:
        code, _, err, _ = measured([
            "capture", "--display", "plain", "--prompts", str(prompts(tmp_path / "p.jsonl", 3)),
            "--out", str(out), "--server", url, "--tokenizer", TOKENIZER,
            "--max-new-tokens", "32"], tmp_path)
    assert code == 0, err
    rows = [ShardReader(out).row(i) for i in range(3)]
    assert [r.acceptance for r in rows] == [None, None, None]
    code, shown, err, peak = measured(["inspect", str(out), "--index", "0"], tmp_path)
    print(f"inspect of a captured row: peak RSS {peak:.0f} MiB")
    assert code == 0 and "accept " not in shown and peak < RSS_LIMIT_MIB, err


@pytest.mark.slow
def test_inspect_of_a_row_stored_with_impossible_counts_says_so(
        sim: SimProcess, tmp_path: Path) -> None:
    """A row stored before the check (written here as the old capture wrote it)."""
    bad = RequestAcceptance(9, 1, 1, (1 << 31) - 1, (0, 1))
    batch = tmp_path / "b"
    manifest = Manifest(batch, BatchConfig("/p.jsonl", "00" * 32, "/t", "ab" * 32, "",
                                           SamplingIdentity(16, (SamplingPreset(),))),
                        acceptance_column=True)
    manifest.save_atomic()
    row = ShardRow("s0", list(range(20)), 11, "length", None, -1, [], "http://x", "r", 0.5,
                   datetime.now(UTC), acceptance=column_counts(bad))
    with ShardWriter(batch, metadata=ShardMetadata(), manifest=manifest) as writer:
        writer.add(row)
    code, shown, err, peak = measured(["inspect", str(batch), "--index", "0", "--raw-ids"],
                                      tmp_path)
    print(f"inspect of a stored impossible row: peak RSS {peak:.0f} MiB")
    assert code == 0, err
    assert "stored acceptance counts are impossible: spec_num_proposed_drafts" in shown
    assert peak < RSS_LIMIT_MIB


@pytest.mark.slow
@pytest.mark.parametrize("value", [1e308, -3.0])
def test_status_shows_an_impossible_live_figure_as_invalid(
        sim: SimProcess, tmp_path: Path, value: float) -> None:
    env = {"EAGLE_TUI_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin",
           "NO_COLOR": "1"}
    with proxy(sim.url, {"server_info": {"avg_spec_accept_length": value}}) as url:
        text = subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", "status", "--once",
                               "--url", url], capture_output=True, text=True, timeout=120,
                              env=env, cwd=ROOT)
        doc = subprocess.run([sys.executable, "-m", "eagle_tui.tui.cli", "status", "--once",
                              "--json", "--url", url], capture_output=True, text=True,
                             timeout=120, env=env, cwd=ROOT)
    assert "invalid: " in text.stdout and "is impossible" in text.stdout, text.stdout
    assert "0" * 20 not in text.stdout and "-3.00" not in text.stdout
    entry = json.loads(doc.stdout)["servers"][0]["acceptance"]
    assert entry["figure"] is None and entry["label"] is None
    assert entry["invalid"].startswith("invalid: ")


@pytest.mark.slow
@pytest.mark.parametrize(("proposed", "stored"), [(3, True), (10, False)])
def test_capture_bounds_drafts_per_step_by_the_servers_draft_tokens(
        sim: SimProcess, tmp_path: Path, proposed: int, stored: bool) -> None:
    """The sim runs 4 draft tokens: an answer claiming 10 proposed drafts in its one verify
    step is consistent in itself (and under the 256 believed of an unknown server), but not
    for this server; 3 is."""
    out = tmp_path / "batch"
    change = {"spec_verify_ct": 1, "spec_num_proposed_drafts": proposed,
              "spec_num_correct_drafts": 0, "spec_correct_drafts_histogram": [1]}
    with proxy(sim.url, {"meta_info": change}) as url:
        code, _, err, _ = measured([
            "capture", "--display", "plain", "--prompts", str(prompts(tmp_path / "p.jsonl", 3)),
            "--out", str(out), "--server", url, "--tokenizer", TOKENIZER,
            "--max-new-tokens", "4"], tmp_path)
    assert code == 0, err
    rows = [ShardReader(out).row(i) for i in range(3)]
    assert all((r.acceptance is not None) == stored for r in rows), rows

"""Multi-turn capture end to end against simulated SGLang servers (real processes, sockets):
every stored prompt is the rendering of its history with the model's own earlier answers,
tool calls that match and that diverge, both history modes, server affinity, and SIGKILL at
random moments followed by resumes: every turn exactly once."""

from __future__ import annotations

import io
import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from support.conversations import (
    check_model_histories,
    rules_tokenizer_dir,
    turn_starts,
    write_conversations,
)
from support.crashresume import assert_only_valid_shards, kill_at_random_moments
from test_e2e_support import run_cli, start_cli
from test_engine_fakes import rows_of

from eagle_tui.core.capture.config import CaptureConfig
from eagle_tui.core.capture.conversation import MultiTurn
from eagle_tui.core.capture.engine import CaptureEngine, CaptureSummary
from eagle_tui.core.shards.manifest import Manifest, TurnsIdentity
from eagle_tui.core.shards.reader import ShardReader
from eagle_tui.core.shards.stats import compute_stats
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.tokenizer import LoadedTokenizer, load_tokenizer
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.cli.inspect import run as run_inspect
from eagle_tui.tui.cli.main import build_parser, main
from eagle_tui.tui.cli.stats import run as run_stats

pytestmark = pytest.mark.slow

FAST = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0")


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rules_tokenizer_dir(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def rules(tokenizer_dir: Path) -> LoadedTokenizer:
    return load_tokenizer(tokenizer_dir)


@pytest.fixture(scope="module")
def sims() -> Iterator[tuple[SimProcess, SimProcess]]:
    with SimProcess(FAST) as a, SimProcess(FAST) as b:
        a.wait_ready(60)
        b.wait_ready(60)
        yield a, b


async def run_batch(tmp_path: Path, tokenizer_dir: Path, servers: list[str], count: int,
                    turns: MultiTurn, **settings: Any) -> tuple[CaptureSummary,
                                                                list[dict[str, Any]]]:
    config = CaptureConfig(prompts=tmp_path / "p.jsonl", out_dir=tmp_path / "out",
                           servers=tuple(ServerURL.parse(u) for u in servers),
                           tokenizer=tokenizer_dir, max_new_tokens=400,
                           concurrency=4, turns=turns, **settings)
    summary = await CaptureEngine(config).run()
    assert summary.state == "finished", summary.reason
    return summary, rows_of(tmp_path / "out")


def conversations_of(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[row["conversation_id"]].append(row)
    return {cid: sorted(turns, key=lambda r: r["turn"]) for cid, turns in grouped.items()}


async def test_model_history_tool_loops_match_and_diverge(
        tmp_path: Path, tokenizer_dir: Path, rules: LoadedTokenizer,
        sims: tuple[SimProcess, SimProcess]) -> None:
    records = write_conversations(tmp_path / "p.jsonl", 60)
    summary, rows = await run_batch(tmp_path, tokenizer_dir, [s.url for s in sims], 60,
                                    MultiTurn("model"))
    assert check_model_histories(rows, records, rules) == len(rows) == summary.progress.counts.done
    grouped = conversations_of(rows)
    assert len(grouped) == 60 and all(r["sample_id"] == f"{r['conversation_id']}#turn{r['turn']}"
                                      for r in rows)
    tool_loops = {cid: turns for cid, turns in grouped.items() if int(cid[1:]) % 3 == 0}
    matched = [t for t in tool_loops.values() if len(t) >= 2
               and "tool_call_diverged" not in t[0]["flags"]]
    diverged = [t for t in tool_loops.values() if "tool_call_diverged" in t[0]["flags"]]
    assert matched and diverged  # the sim sometimes makes the dataset's call, sometimes not
    assert all(len(t) == 1 for t in diverged)  # --on-divergence end: nothing after it
    second = rules.decode(matched[0][1]["input_ids"][: matched[0][1]["prompt_len"]])
    assert "<|tool_call_begin|>functions.get_weather:0" in second  # the model's own call...
    assert "## Return of functions.get_weather:0\nsunny, 21 C" in second  # ...and its result
    plain = [t for cid, t in grouped.items() if int(cid[1:]) % 3 == 2]
    assert all(t[0]["flags"].count("tool_call_diverged") == 1 for t in plain)  # called, no result
    chats = [t for cid, t in grouped.items() if int(cid[1:]) % 3 == 1 and len(t) == 3]
    assert chats and all(t[2]["parent_id"] == t[1]["sample_id"] for t in chats)
    same_server = sum(len({r["endpoint"] for r in t}) == 1 for t in grouped.values())
    assert same_server >= 0.9 * len(grouped)  # turn k+1 goes where turn k's prefix is cached
    manifest = Manifest.load(tmp_path / "out")
    assert manifest.schema_version == 2 and manifest.config.turns == TurnsIdentity("model")
    assert summary.progress.flags.get("tool_call_diverged") == sum(
        "tool_call_diverged" in r["flags"] for r in rows)
    check_stats_inspect_export(tmp_path, grouped, rows)


def check_stats_inspect_export(tmp_path: Path, grouped: dict[str, list[dict[str, Any]]],
                               rows: list[dict[str, Any]]) -> None:
    """stats counts turns per conversation and divergences; inspect shows a conversation's
    turns in order; export keeps one row per turn, ids exact."""
    out = tmp_path / "out"
    stats = compute_stats(ShardReader(out)).conversations
    assert stats is not None and stats.conversations == len(grouped)
    assert stats.turns == {str(n): c for n, c in sorted(
        Counter(len(t) for t in grouped.values()).items())}
    assert stats.diverged == sum("tool_call_diverged" in r["flags"] for r in rows)
    longest = max(grouped.values(), key=len)
    printed = io.StringIO()
    code = run_inspect(build_parser(["inspect"]).parse_args([
        "inspect", str(out), "--conversation", longest[0]["conversation_id"]]),
                       Console(file=printed, width=200, markup=False, highlight=False))
    assert code == 0
    order = re.findall(r"^sample (\S+)", printed.getvalue(), re.MULTILINE)
    assert order == [r["sample_id"] for r in longest]
    assert f"turn 1   parent {longest[0]['sample_id']}" in printed.getvalue()
    stats_text = io.StringIO()
    assert run_stats(build_parser(["stats"]).parse_args(["stats", str(out)]),
                     Console(file=stats_text, width=200)) == 0
    assert "conversations (multi-turn)" in stats_text.getvalue()
    assert main(["export", str(out), "--format", "speculators", "--out",
                 str(tmp_path / "x.jsonl"), "--keep-flag", "over_max_new_tokens"]) == 0
    exported = [json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert {e["id"]: e["input_ids"] for e in exported} == {
        r["sample_id"]: r["input_ids"] for r in rows}


@pytest.mark.parametrize("kwargs", [{"thinking": False}, {"preserve_thinking": True}])
async def test_template_kwargs_shape_every_turn(
        tmp_path: Path, tokenizer_dir: Path, rules: LoadedTokenizer,
        sims: tuple[SimProcess, SimProcess], kwargs: dict[str, Any]) -> None:
    records = write_conversations(tmp_path / "p.jsonl", 18)
    _, rows = await run_batch(tmp_path, tokenizer_dir, [sims[0].url], 18,
                              MultiTurn("model", "dataset"), template_kwargs=kwargs)
    assert check_model_histories(rows, records, rules, **kwargs) == len(rows)
    later = [r for r in rows if r["turn"] > 0]
    assert later
    if "thinking" in kwargs:
        assert all(r["input_ids"][r["prompt_len"] - 1] == 163607 for r in rows)
    else:  # every earlier answer keeps its reasoning, even before a later plain answer
        third = next(r for r in later if r["turn"] == 2)
        assert rules.decode(third["input_ids"][: third["prompt_len"]]).count("<think></think>") == 0


async def test_divergence_can_keep_the_dataset_call(
        tmp_path: Path, tokenizer_dir: Path, rules: LoadedTokenizer,
        sims: tuple[SimProcess, SimProcess]) -> None:
    records = write_conversations(tmp_path / "p.jsonl", 30)
    _, rows = await run_batch(tmp_path, tokenizer_dir, [sims[1].url], 30,
                              MultiTurn("model", "dataset"))
    assert check_model_histories(rows, records, rules) == len(rows)
    grouped = conversations_of(rows)
    kept = [t for cid, t in grouped.items()
            if int(cid[1:]) % 3 == 0 and "tool_call_diverged" in t[0]["flags"]]
    assert kept and all(len(t) >= 2 for t in kept)
    text = rules.decode(kept[0][1]["input_ids"][: kept[0][1]["prompt_len"]])
    call_id = f"call_{int(kept[0][0]['conversation_id'][1:])}_a"
    assert f"<|tool_call_begin|>{call_id}" in text  # the dataset's call, kept


async def test_dataset_history_renders_the_dataset_prefix(
        tmp_path: Path, tokenizer_dir: Path, rules: LoadedTokenizer,
        sims: tuple[SimProcess, SimProcess]) -> None:
    records = write_conversations(tmp_path / "p.jsonl", 12)
    _, rows = await run_batch(tmp_path, tokenizer_dir, [s.url for s in sims], 12, MultiTurn())
    expected = sum(len(turn_starts(r["messages"])) for r in records)
    assert len(rows) == expected
    by_id = {r["id"]: r for r in records}
    for row in rows:
        record = by_id[row["conversation_id"]]
        start = turn_starts(record["messages"])[row["turn"]][0]
        prompt = rules.render(record["messages"][:start], record.get("tools"))
        assert row["input_ids"][: row["prompt_len"]] == prompt, row["sample_id"]
        assert row["parent_id"] is None


def test_sigkill_at_random_moments_then_resume_every_turn_once(
        tmp_path: Path, tokenizer_dir: Path, rules: LoadedTokenizer,
        sims: tuple[SimProcess, SimProcess]) -> None:
    records = write_conversations(tmp_path / "p.jsonl", 240)

    def args(out: Path) -> list[str]:
        return ["--prompts", str(tmp_path / "p.jsonl"), "--out", str(out),
                "--server", sims[0].url, "--server", sims[1].url,
                "--tokenizer", str(tokenizer_dir), "--max-new-tokens", "400",
                "--concurrency", "8", "--shard-rows", "15", "--turns", "all",
                "--history", "model"]

    clean = run_cli(*args(tmp_path / "clean"))
    assert clean.returncode == 0, clean.stderr[-3000:]
    out = tmp_path / "out"
    kill_at_random_moments(
        lambda resume, log: start_cli(*args(out), *(["--resume"] if resume else []), log=log),
        out, tmp_path, random.Random(14), rows_below=300)
    final = run_cli(*args(out), "--resume")
    assert final.returncode == 0, final.stderr[-3000:]
    counts = assert_only_valid_shards(out)
    assert set(counts.values()) == {1}
    rows = rows_of(out)
    # The sim answers a prompt the same way every time, so the resumed batch (histories
    # rebuilt from stored rows) must hold exactly the rows of the uninterrupted run.
    expected = {r["sample_id"]: r["input_ids"] for r in rows_of(tmp_path / "clean")}
    assert {r["sample_id"]: r["input_ids"] for r in rows} == expected
    assert check_model_histories(rows, records, rules) == len(rows)
    assert Counter(r["turn"] for r in rows)[2] > 0

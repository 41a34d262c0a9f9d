"""Multi-turn capture against a poison conversation and answers cut short (issue 24 items 4
and 12, issue 20 item 9), with simulated servers as real processes.

- a dataset tool call whose ``arguments`` string is JSON nested 5,000 deep cannot stop the
  batch (it raised RecursionError and crashed every run and every resume);
- conversations that end at a truncated answer say so: the turns never generated are counted
  per reason in the summary, the manifest and ``stats``; the ending is named
  (``conversation c0000 ended after turn 0: no </think> (truncated)``) in the summary, in
  ``stats``, in ``inspect`` and in the Inspect view's conversation line (``v``)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from support.conversations import conversation, rules_tokenizer_dir
from test_engine_fakes import rows_of

from eagle_tui.core.capture.config import CaptureConfig
from eagle_tui.core.capture.conversation import (
    Conversation,
    MultiTurn,
    normalized_arguments,
)
from eagle_tui.core.capture.engine import CaptureEngine
from eagle_tui.core.capture.report import summary_text
from eagle_tui.core.samples.select import SampleFilter
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.tokenizer.kimi_parse import ParsedAnswer, ToolCall
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.cli.inspect import run as run_inspect
from eagle_tui.tui.cli.main import build_parser
from eagle_tui.tui.cli.stats import run as run_stats
from eagle_tui.tui.screens.inspect import summary_text as inspect_summary
from eagle_tui.tui.sources.samples import SampleSource

FAST = ("--time-scale", "0", "--tokens-per-s", "0", "--ttft", "0")
DEEP = "[" * 5000 + "]" * 5000
ENDING = "conversation c0000 ended after turn 0: no </think> (truncated)"


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rules_tokenizer_dir(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    with SimProcess(FAST) as sim:
        sim.wait_ready(60)
        yield sim


def poison(i: int) -> dict[str, Any]:
    """A tool loop whose dataset call carries ``arguments`` nested 5,000 deep."""
    record = conversation(i - i % 6)  # kind 0 with Paris: the sim often makes that call
    record = json.loads(json.dumps(record))
    record["id"] = f"poison{i:04d}"
    record["messages"][1]["tool_calls"][0]["function"]["arguments"] = DEEP
    return record


def config(tmp_path: Path, tokenizer_dir: Path, sim: SimProcess, **settings: Any) -> (
    CaptureConfig
):
    values: dict[str, Any] = {"max_new_tokens": 400, "concurrency": 8}
    values.update(settings)
    return CaptureConfig(prompts=tmp_path / "p.jsonl", out_dir=tmp_path / "out",
                         servers=(ServerURL.parse(sim.url),), tokenizer=tokenizer_dir,
                         turns=MultiTurn("model"), **values)


def test_deep_arguments_are_compared_as_text_not_a_crash() -> None:
    assert normalized_arguments(DEEP) == DEEP
    assert normalized_arguments('{"b": 1, "a": [1, 2]}') == '{"a":[1,2],"b":1}'
    record = poison(0)
    talk = Conversation(record["messages"], history="model", on_divergence="end")
    talk.prompt_messages(0)
    call = ToolCall("functions.get_weather:0", "get_weather", '{"city":"Paris"}')
    verdict = talk.record_answer(0, ParsedAnswer("r", "", (call,), complete=True))
    assert not verdict.go_on and "tool_call_diverged" in verdict.flags


async def test_a_poison_conversation_cannot_stop_the_batch(
        tmp_path: Path, tokenizer_dir: Path, sim: SimProcess) -> None:
    good = [conversation(i) for i in range(100)]
    bad = [poison(i) for i in range(0, 60, 6)]
    records = good[:50] + bad + good[50:]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = await CaptureEngine(config(tmp_path, tokenizer_dir, sim)).run()
    assert summary.state == "finished", summary.reason
    stored = {row["conversation_id"] for row in rows_of(tmp_path / "out")}
    assert {r["id"] for r in good} <= stored  # every good conversation saved
    again = await CaptureEngine(config(tmp_path, tokenizer_dir, sim, resume=True)).run()
    assert again.state == "finished", again.reason


def long_conversation(i: int, turns: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for k in range(turns):
        messages += [{"role": "user", "content": f"question {k} of chat {i}"},
                     {"role": "assistant", "content": f"answer {k}", "reasoning_content": "r"}]
    return {"id": f"c{i:04d}", "messages": messages}


async def test_turns_never_generated_are_counted_and_named_everywhere(
        tmp_path: Path, tokenizer_dir: Path, sim: SimProcess) -> None:
    turns = 500
    records = [long_conversation(i, turns) for i in range(3)]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = await CaptureEngine(config(tmp_path, tokenizer_dir, sim, max_new_tokens=4)).run()
    out = tmp_path / "out"
    assert summary.state == "finished" and len(rows_of(out)) == 3
    reason = "no </think> (truncated)"
    assert summary.progress.ended_reasons == {reason: 3 * (turns - 1)}
    text = summary_text(summary)
    assert f"turns not generated   {3 * (turns - 1)}" in text and ENDING in text, text
    assert Manifest.load(out).extra.turns_not_generated == {reason: 3 * (turns - 1)}

    printed = io.StringIO()
    assert run_stats(build_parser(["stats"]).parse_args(["stats", str(out)]),
                     Console(file=printed, width=200)) == 0
    assert ENDING in printed.getvalue()
    assert f"turns not generated (conversations ended early): {3 * (turns - 1)}" in \
        printed.getvalue()

    shown = io.StringIO()
    assert run_inspect(build_parser(["inspect"]).parse_args(
        ["inspect", str(out), "--conversation", "c0000"]),
        Console(file=shown, width=200, markup=False, highlight=False)) == 0
    assert ENDING in shown.getvalue()

    source = SampleSource(out)
    try:
        source.select(SampleFilter(conversation="c0000"))
        assert ENDING in inspect_summary(source.summary(), source.page(0))
    finally:
        source.close()

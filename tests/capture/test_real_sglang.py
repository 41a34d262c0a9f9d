"""The capture engine against a real SGLang server (opt-in).

Skipped unless ``EAGLE_REAL_SGLANG_URL`` names a running server serving the script model of
scripts/realsglang (``realsglang.sh start script``, see docs/real-sglang.md) and
``EAGLE_REAL_SGLANG_MODEL`` is that model's directory (tokenizer, vocab 1024, eos 2,
<think>=1020, </think>=1021). After a prompt ending in "\\n" that model answers exactly
``<think>Hmm.</think> Hi!<|im_end|>`` greedily.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from test_engine_fakes import rows_of

from eagle_tui.core.capture.config import CaptureConfig, RetryPolicy
from eagle_tui.core.capture.engine import CaptureEngine
from eagle_tui.core.capture.prompts import PromptRecord, open_prompts
from eagle_tui.core.sampling import SamplingPreset
from eagle_tui.core.sglang import GenerateRequest, SamplingParams, SGLangClient
from eagle_tui.core.tokenizer import load_tokenizer
from eagle_tui.core.urls import ServerURL

REAL_URL = os.environ.get("EAGLE_REAL_SGLANG_URL")
MODEL_ENV = os.environ.get("EAGLE_REAL_SGLANG_MODEL")
MODEL_DIR = Path(MODEL_ENV or ".")
SCRIPT = [1020, 42, 496, 16, 1021, 435, 75, 3, 2]

pytestmark = [
    pytest.mark.realsglang,
    pytest.mark.skipif(not REAL_URL, reason="set EAGLE_REAL_SGLANG_URL to a real SGLang server"),
    pytest.mark.skipif(not MODEL_ENV, reason="set EAGLE_REAL_SGLANG_MODEL to the script model's "
                       "directory (docs/real-sglang.md)"),
]


def write_prompts(path: Path) -> None:
    records: list[Any] = []
    for i in range(12):
        messages = [{"role": "user", "content": f"Hello number {i}"}]
        if i % 3 == 1:
            messages.insert(0, {"role": "system", "content": "Be brief."})
        if i % 3 == 2:
            messages = [{"role": "user", "content": "Hi"},
                        {"role": "assistant", "content": "Yo"}, *messages]
        records.append(json.dumps({"id": f"r{i:02d}", "messages": messages}))
    records.insert(5, '{"id": "broken", "messages": [')
    path.write_text("\n".join(records) + "\n")


async def test_capture_stores_exactly_what_the_real_server_returned(tmp_path: Path) -> None:
    assert REAL_URL is not None
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts)
    presets = (SamplingPreset("greedy", temperature=0.0), SamplingPreset("t1", temperature=1.0))
    config = CaptureConfig(prompts=prompts, out_dir=tmp_path / "out",
                           servers=(ServerURL.parse(REAL_URL),),
                           tokenizer=MODEL_DIR, max_new_tokens=32, presets=presets,
                           concurrency=4, retry=RetryPolicy(max_attempts=2), shard_rows=10)
    tokenizer = load_tokenizer(MODEL_DIR)
    summary = await CaptureEngine(config, tokenizer=tokenizer).run()
    assert summary.state == "finished" and summary.progress.counts.done == 24
    counts = summary.progress.counts
    assert counts.rejected == 2 and counts.failed == 0  # 1 line x 2 presets

    records = {r.sample_id: r for r in open_prompts(prompts) if isinstance(r, PromptRecord)}
    rows = rows_of(config.out_dir)
    assert sorted(r["sample_id"] for r in rows) == sorted(
        f"{sid}#{p.name}" for sid in records for p in presets)
    async with SGLangClient(ServerURL.parse(REAL_URL)) as client:
        for row in rows:
            sample_id, preset = row["sample_id"].split("#")
            record = records[sample_id]
            prompt = tokenizer.render(record.messages, record.tools)
            assert row["input_ids"][: row["prompt_len"]] == prompt
            output = row["input_ids"][row["prompt_len"]:]
            assert output == SCRIPT, row["sample_id"]
            if preset == "greedy":  # the server, asked again, says the same
                again = await client.generate(GenerateRequest(prompt, SamplingParams(
                    max_new_tokens=32, temperature=0.0, stop_token_ids=(2,))))
                assert list(again.output_ids) == output
            assert row["finish_reason"] == "stop" and row["matched_stop"] == 2
            assert row["think_end"] == row["prompt_len"] + 4
            assert set(row["flags"]) == {"prompt_no_think", "think_start_in_output"}
            assert row["endpoint"] == REAL_URL.rstrip("/")


async def test_a_two_turn_conversation_regenerated_with_the_models_own_history(
        tmp_path: Path) -> None:
    """Multi-turn (issue 14): turn 1's prompt holds the model's own answer to turn 0 (parsed
    from its output ids), not the dataset's; both rows are what the server returned."""
    from eagle_tui.core.capture.conversation import MultiTurn

    assert REAL_URL is not None
    prompts = tmp_path / "two.jsonl"
    dataset = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there."},
               {"role": "user", "content": "How are you?"},
               {"role": "assistant", "content": "Fine, thanks."}]
    prompts.write_text(json.dumps({"id": "two-turn", "messages": dataset}) + "\n")
    config = CaptureConfig(prompts=prompts, out_dir=tmp_path / "out",
                           servers=(ServerURL.parse(REAL_URL),),
                           tokenizer=MODEL_DIR, max_new_tokens=16,
                           presets=(SamplingPreset(temperature=0.0),), concurrency=2,
                           turns=MultiTurn("model"))
    tokenizer = load_tokenizer(MODEL_DIR)
    summary = await CaptureEngine(config, tokenizer=tokenizer).run()
    assert summary.state == "finished" and summary.progress.counts.done == 2
    first, second = sorted(rows_of(config.out_dir), key=lambda r: r["turn"])
    assert [first["sample_id"], second["sample_id"]] == ["two-turn#turn0", "two-turn#turn1"]
    assert second["parent_id"] == "two-turn#turn0"
    model_answer = {"role": "assistant", "content": " Hi!", "reasoning_content": "Hmm."}
    assert first["input_ids"][: first["prompt_len"]] == tokenizer.render(dataset[:1])
    assert second["input_ids"][: second["prompt_len"]] == tokenizer.render(
        [dataset[0], model_answer, dataset[2]])
    async with SGLangClient(ServerURL.parse(REAL_URL)) as client:
        for row in (first, second):
            prompt = row["input_ids"][: row["prompt_len"]]
            assert row["input_ids"][row["prompt_len"]:] == SCRIPT
            again = await client.generate(GenerateRequest(prompt, SamplingParams(
                max_new_tokens=16, temperature=0.0, stop_token_ids=(2,))))
            assert list(again.output_ids) == SCRIPT and again.prompt_tokens == len(prompt)

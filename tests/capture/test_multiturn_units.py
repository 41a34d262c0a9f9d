"""Multi-turn capture, piece by piece: turn planning, the model's answer parsed from ids, tool
call matching, per-turn histories, the Kimi-K2.5 history rules of the test template, and the
schema-2 shard rows."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support.conversations import RULES_TEMPLATE, call
from test_engine_fakes import bundled_tokenizer, make_config

from eagle_tui.core import kimi
from eagle_tui.core.capture.batch import prepare_batch
from eagle_tui.core.capture.conversation import (
    DIVERGED_FLAG,
    Conversation,
    MultiTurn,
    match_calls,
    normalized_arguments,
    plan_turns,
    turn_sample_id,
)
from eagle_tui.core.capture.prompts import open_prompts
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.shards.reader import ShardReader
from eagle_tui.core.shards.schema import (
    SHARD_SCHEMA,
    SHARD_SCHEMA_V2,
    FooterTokenizer,
    ShardMetadata,
    ShardRow,
    rows_to_table,
)
from eagle_tui.core.shards.writer import ShardWriter
from eagle_tui.core.tokenizer import LoadedTokenizer, load_tokenizer
from eagle_tui.core.tokenizer.kimi_parse import AnswerTokens, ParsedAnswer, ToolCall, parse_answer
from eagle_tui.core.tokenizer.loader import bundled_tokenizer_path
from eagle_tui.tui.cli import capture as capture_cli

USER = {"role": "user", "content": "weather in Paris?"}
CALL = {"role": "assistant", "content": "", "tool_calls": [call("call_a", "Paris")]}
RESULT = {"role": "tool", "tool_call_id": "call_a", "content": "sunny"}
ANSWER = {"role": "assistant", "content": "Sunny.", "reasoning_content": "the tool said so"}
AGAIN = {"role": "user", "content": "and tomorrow?"}
LAST = {"role": "assistant", "content": "Rain."}
TOOL_LOOP = [USER, CALL, RESULT, ANSWER, AGAIN, LAST]


@pytest.fixture(scope="module")
def rules() -> LoadedTokenizer:
    """The bundled tokenizer with the Kimi-K2.5 history-rules template."""
    tokenizer = load_tokenizer(bundled_tokenizer_path())
    tokenizer.hf.chat_template = RULES_TEMPLATE.read_text()
    return tokenizer


def tokens() -> AnswerTokens:
    tokenizer = bundled_tokenizer()
    return AnswerTokens.resolve(tokenizer.token_id, (kimi.IM_END, kimi.EOS))


def encode(text: str) -> list[int]:
    return list(bundled_tokenizer().hf.encode(text, add_special_tokens=False))


def parse(ids: list[int], *, reasoning_open: bool = True) -> ParsedAnswer:
    return parse_answer(ids, reasoning_open=reasoning_open, tokens=tokens(),
                        decode=bundled_tokenizer().decode)


# -- turns --------------------------------------------------------------------------------


def test_turns_are_assistant_runs_after_a_user_and_the_open_end() -> None:
    assert [(s.start, s.end) for s in plan_turns(TOOL_LOOP)] == [(1, 2), (3, 4), (5, 6)]
    open_end = [USER, ANSWER, AGAIN]
    assert [(s.start, s.end) for s in plan_turns(open_end)] == [(1, 2), (3, 3)]
    greeting_first = [{"role": "system", "content": "s"}, LAST, USER, CALL, ANSWER]
    assert [(s.start, s.end) for s in plan_turns(greeting_first)] == [(3, 5)]
    assert turn_sample_id("q7#t0.7", 2) == "q7#t0.7#turn2"


def test_full_conversation_kept_next_to_the_single_turn_messages(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"id": "a", "messages": TOOL_LOOP}) + "\n")
    (record,) = list(open_prompts(path))
    assert not isinstance(record, type(None))
    assert record.messages == tuple(TOOL_LOOP[:5])  # single-turn: trailing answer dropped
    assert record.conversation == tuple(TOOL_LOOP)  # multi-turn: every message


# -- the model's answer from ids ----------------------------------------------------------


def test_answer_with_reasoning_content_and_two_calls() -> None:
    ids = [*encode("hmm, the tool"), kimi.THINK_END, *encode("Checking."),
           kimi.TOOL_CALLS_SECTION_BEGIN,
           kimi.TOOL_CALL_BEGIN, *encode("functions.get_weather:0"),
           kimi.TOOL_CALL_ARGUMENT_BEGIN, *encode('{"city": "Paris"}'), kimi.TOOL_CALL_END,
           kimi.TOOL_CALL_BEGIN, *encode("functions.get_time:1"),
           kimi.TOOL_CALL_ARGUMENT_BEGIN, *encode("{}"), kimi.TOOL_CALL_END,
           kimi.TOOL_CALLS_SECTION_END, kimi.IM_END]
    answer = parse(ids)
    assert answer.complete and answer.reasoning == "hmm, the tool"
    assert answer.content == "Checking."
    assert answer.tool_calls == (
        ToolCall("functions.get_weather:0", "get_weather", '{"city": "Paris"}'),
        ToolCall("functions.get_time:1", "get_time", "{}"))
    assert answer.as_message()["tool_calls"][0] == {
        "id": "functions.get_weather:0", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}


def test_incomplete_answers_say_why() -> None:
    assert parse([*encode("thinking on"), kimi.IM_END]).problem == (
        "the output never closes its reasoning (no </think>)")
    cut = parse([*encode("r"), kimi.THINK_END, *encode("half an ans")])
    assert not cut.complete and "cut short" in (cut.problem or "")
    open_section = parse([*encode("r"), kimi.THINK_END, kimi.TOOL_CALLS_SECTION_BEGIN,
                          kimi.TOOL_CALL_BEGIN, *encode("functions.f:0"), kimi.IM_END])
    assert not open_section.complete and "never closes" in (open_section.problem or "")


def test_no_open_reasoning_and_a_generated_think() -> None:
    plain = parse([*encode("Hi!"), kimi.IM_END], reasoning_open=False)
    assert plain.complete and plain.reasoning is None and plain.content == "Hi!"
    qwen_style = parse([kimi.THINK, *encode("Hmm."), kimi.THINK_END, *encode(" Hi!"),
                        kimi.IM_END], reasoning_open=False)
    assert qwen_style.reasoning == "Hmm." and qwen_style.content == " Hi!"


# -- tool-call matching -------------------------------------------------------------------


def test_calls_match_after_json_normalisation_in_any_order() -> None:
    assert normalized_arguments('{ "b": 1, "a": [1, 2] }') == '{"a":[1,2],"b":1}'
    model = (ToolCall("functions.get_time:1", "get_time", "{}"),
             ToolCall("functions.get_weather:0", "get_weather", '{"city":"Paris"}'))
    dataset = [call("x", "Paris"), {"id": "y", "function": {"name": "get_time",
                                                             "arguments": {}}}]
    assert match_calls(model, dataset) == {"x": "functions.get_weather:0",
                                           "y": "functions.get_time:1"}
    assert match_calls(model[1:], [call("x", "Berlin")]) is None
    assert match_calls(model, dataset[:1]) is None


def model_answer(*calls: ToolCall, content: str = "", reasoning: str = "mine") -> ParsedAnswer:
    return ParsedAnswer(reasoning, content, calls, complete=True)


PARIS = ToolCall("functions.get_weather:0", "get_weather", '{"city":"Paris"}')


def test_model_history_replaces_each_turn_and_readdresses_results() -> None:
    talk = Conversation(TOOL_LOOP, history="model", on_divergence="end")
    assert talk.prompt_messages(0) == [USER]
    assert talk.record_answer(0, model_answer(PARIS)).go_on
    second = talk.prompt_messages(1)
    assert second[1]["tool_calls"][0]["id"] == "functions.get_weather:0"
    assert second[1]["reasoning_content"] == "mine"
    assert second[2] == {**RESULT, "tool_call_id": "functions.get_weather:0"}
    assert talk.record_answer(1, model_answer(content="Sunny it is.")) == (
        talk.record_answer(1, model_answer(content="Sunny it is.")))
    third = Conversation(TOOL_LOOP, history="model", on_divergence="end")
    third.prompt_messages(0)
    third.record_answer(0, model_answer(PARIS))
    third.prompt_messages(1)
    third.record_answer(1, model_answer(content="Sunny it is."))
    assert [m.get("content") for m in third.prompt_messages(2)][-2:] == [
        "Sunny it is.", "and tomorrow?"]


@pytest.mark.parametrize("answer", [
    model_answer(ToolCall("functions.get_weather:0", "get_weather", '{"city":"Rome"}')),
    model_answer(content="I will not call anything."),
])
def test_divergence_ends_or_keeps_the_dataset_call(answer: ParsedAnswer) -> None:
    ended = Conversation(TOOL_LOOP, history="model", on_divergence="end")
    ended.prompt_messages(0)
    verdict = ended.record_answer(0, answer)
    assert not verdict.go_on and verdict.flags == (DIVERGED_FLAG,)
    kept = Conversation(TOOL_LOOP, history="model", on_divergence="dataset")
    kept.prompt_messages(0)
    verdict = kept.record_answer(0, answer)
    assert verdict.go_on and verdict.flags == (DIVERGED_FLAG,)
    assert kept.prompt_messages(1) == [USER, CALL, RESULT]


def test_a_call_where_the_dataset_has_no_result_diverges_except_at_the_end() -> None:
    chat = [USER, ANSWER, AGAIN, LAST]
    talk = Conversation(chat, history="model", on_divergence="end")
    talk.prompt_messages(0)
    assert talk.record_answer(0, model_answer(PARIS)).flags == (DIVERGED_FLAG,)
    last = Conversation(chat, history="model", on_divergence="end")
    last.prompt_messages(0)
    last.record_answer(0, model_answer(content="ok"))
    last.prompt_messages(1)
    assert last.record_answer(1, model_answer(PARIS)) == last.record_answer(
        1, model_answer(PARIS))
    assert not last.record_answer(1, model_answer(PARIS)).flags


def test_an_incomplete_answer_ends_the_conversation() -> None:
    talk = Conversation(TOOL_LOOP, history="model", on_divergence="dataset")
    talk.prompt_messages(0)
    verdict = talk.record_answer(0, ParsedAnswer(None, "", (), False, "cut short"))
    assert not verdict.go_on and "cut short" in (verdict.ended or "")


def test_dataset_history_is_the_dataset_prefix() -> None:
    talk = Conversation(TOOL_LOOP, history="dataset", on_divergence="end")
    assert [talk.prompt_messages(k) for k in range(3)] == [
        TOOL_LOOP[:1], TOOL_LOOP[:3], TOOL_LOOP[:5]]


# -- the template's history rules ---------------------------------------------------------


def test_rules_template_drops_reasoning_before_the_last_plain_answer(
        rules: LoadedTokenizer) -> None:
    messages = [USER, {**CALL, "reasoning_content": "call it"}, RESULT, ANSWER, AGAIN]
    text = rules.render_text(messages)
    assert "the tool said so" not in text and "call it" not in text
    assert text.endswith("<|im_assistant|>assistant<|im_middle|><think>")
    suffix = rules.render_text(messages[:3])  # the tool-call turn is after every plain answer
    assert "<think>call it</think>" in suffix
    kept = rules.render_text(messages, preserve_thinking=True)
    assert "<think>the tool said so</think>" in kept and "<think>call it</think>" in kept
    off = rules.render_text(messages[:3], thinking=False)
    assert "call it" not in off and off.endswith("<think></think>")
    assert rules.render(messages, thinking=False)[-2:] == [kimi.THINK, kimi.THINK_END]


def test_a_turn_prompt_is_not_an_extension_of_the_previous_sequence(
        rules: LoadedTokenizer) -> None:
    first = rules.render([USER])
    output = [*encode("let me think"), kimi.THINK_END, *encode("Sunny."), kimi.IM_END]
    answer = parse(output).as_message()
    second = rules.render([USER, answer, AGAIN])
    assert second[: len(first) + len(output)] != first + output  # reasoning was dropped
    assert "let me think" not in rules.decode(second)


# -- shard rows ---------------------------------------------------------------------------


def row(sample_id: str, **turn: Any) -> ShardRow:
    return ShardRow(sample_id, [1, 2, 3, 4], 2, "stop", 163586, -1, [], "http://h:1", "r0",
                    0.5, datetime(2026, 1, 1, tzinfo=UTC), **turn)


META = ShardMetadata(tokenizer=FooterTokenizer(name="t", path="/t", fingerprint="f"),
                     template_hash="h", schema_version=2)


def test_schema_two_round_trips_and_needs_the_turn(tmp_path: Path) -> None:
    rows = [row("c#turn0", conversation_id="c", turn=0),
            row("c#turn1", conversation_id="c", turn=1, parent_id="c#turn0")]
    assert rows_to_table(rows, 2).schema.equals(SHARD_SCHEMA_V2)
    assert rows_to_table(rows).schema.equals(SHARD_SCHEMA)  # version 1 ignores them
    with pytest.raises(ValueError, match="conversation_id and turn"):
        rows_to_table([row("x")], 2)
    from eagle_tui.core.sampling import SamplingIdentity
    from eagle_tui.core.shards.manifest import BatchConfig

    manifest = Manifest(tmp_path, BatchConfig("p", "s", "t", "f", "h",
                                              SamplingIdentity(1, ())), schema_version=2)
    with ShardWriter(tmp_path, metadata=META, manifest=manifest) as writer:
        for item in rows:
            writer.add(item)
    assert Manifest.load(tmp_path).schema_version == 2
    (shard,) = (tmp_path / "shards").iterdir()
    assert pq.read_schema(shard).remove_metadata().equals(SHARD_SCHEMA_V2)
    reader = ShardReader(tmp_path)
    assert reader.row(1) == rows[1]
    assert reader.metadata is not None and reader.metadata.schema_version == 2


def test_version_one_rows_read_without_turns(tmp_path: Path) -> None:
    old = ShardRow.from_dict(rows_to_table([row("q1")]).to_pylist()[0])
    assert (old.conversation_id, old.turn, old.parent_id) == (None, None, None)
    (tmp_path / "manifest.json").write_text(json.dumps({"config": {
        "prompt_file": "p", "prompt_sha256": "s", "tokenizer_path": "t",
        "tokenizer_fingerprint": "f", "template_hash": "h",
        "sampling": {"max_new_tokens": 1, "presets": []}}}))
    assert Manifest.load(tmp_path).schema_version == 1


# -- configuration ------------------------------------------------------------------------


def test_turn_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--on-divergence"):
        make_config(tmp_path, ["http://a:1"], turns=MultiTurn("model", "skip"))  # type: ignore[arg-type]
    args = capture_cli.argparse.ArgumentParser()
    capture_cli.add_arguments(args)
    parsed = args.parse_args(["--prompts", "p", "--out", "o", "--server", "http://a:1",
                              "--tokenizer", "t", "--history", "model"])
    with pytest.raises(ConfigError, match="--history model needs --turns all"):
        capture_cli.config_from_args(parsed)
    parsed.turns = "all"
    assert capture_cli.config_from_args(parsed).turns == MultiTurn("model", "end")


def test_resume_never_mixes_single_and_multi_turn_shards(tmp_path: Path) -> None:
    (tmp_path / "prompts.jsonl").write_text(json.dumps({"id": "a", "messages": TOOL_LOOP}))
    prepare_batch(make_config(tmp_path, ["http://a:1"], turns=MultiTurn()), bundled_tokenizer())
    assert Manifest.load(tmp_path / "out").schema_version == 2
    with pytest.raises(ConfigError, match="not even --force mixes"):
        prepare_batch(make_config(tmp_path, ["http://a:1"], resume=True, force=True),
                      bundled_tokenizer())
    with pytest.raises(ConfigError, match="different config"):
        prepare_batch(make_config(tmp_path, ["http://a:1"], resume=True,
                                  turns=MultiTurn("model")), bundled_tokenizer())


def test_a_detached_multi_turn_batch_keeps_its_settings(tmp_path: Path) -> None:
    from eagle_tui.core.capture.config import config_from_json, config_to_json

    config = make_config(tmp_path, ["http://a:1"], turns=MultiTurn("model", "dataset"))
    back = config_from_json(config_to_json(config))
    assert back.turns == MultiTurn("model", "dataset") and back.history == "model"
    single = config_from_json(config_to_json(make_config(tmp_path, ["http://a:1"])))
    assert not single.multi_turn and b"turns" not in config_to_json(single)


def test_the_sample_header_names_the_conversation() -> None:
    from eagle_tui.tui.screens.sample import sample_header

    assert "conversation c turn 1 (parent c#turn0)" in sample_header(
        row("c#turn1", conversation_id="c", turn=1, parent_id="c#turn0"))
    assert "conversation" not in sample_header(row("q1"))


# -- the driver, in process ---------------------------------------------------------------


BROKEN_CALL = {"role": "assistant", "content": "",  # a call without arguments: tojson fails
               "tool_calls": [{"id": "x", "function": {"name": "f"}}]}


@pytest.mark.parametrize("history", ["dataset", "model"])
async def test_a_turn_that_cannot_render_is_a_reject_with_file_and_line(
        tmp_path: Path, rules: LoadedTokenizer, history: str) -> None:
    from test_engine_fakes import FakeSGLang, capture

    good = [USER, ANSWER, AGAIN, LAST]
    broken = [USER, BROKEN_CALL, {"role": "tool", "tool_call_id": "x", "content": "r"},
              ANSWER, AGAIN, LAST]
    path = tmp_path / "prompts.jsonl"
    path.write_text(json.dumps({"id": "good", "messages": good}) + "\n"
                    + json.dumps({"id": "bad", "messages": broken}) + "\n")
    fake = FakeSGLang()
    # keep the dataset's call: the fake model never calls, so turn 0 diverges
    config = make_config(tmp_path, [fake.url],
                         turns=MultiTurn(history, "dataset"))  # type: ignore[arg-type]
    summary = await capture(config, [fake], rules)
    rejects = [json.loads(x) for x in (tmp_path / "out" / "rejects.jsonl").read_text()
               .splitlines()]
    assert [(r["source"], r["line"], r["sample_id"]) for r in rejects] == [
        (str(path), 2, "bad#turn1")]
    assert rejects[0]["reason"].startswith("turn 1: ")
    from test_engine_fakes import rows_of

    stored = sorted(r["sample_id"] for r in rows_of(tmp_path / "out"))
    assert stored == sorted(["good#turn0", "good#turn1", "bad#turn0"])
    # with the dataset's history turn 2 is tried too (its history holds the same broken
    # call): one more rejected row, the record's line logged once
    assert summary.progress.counts.rejected == (2 if history == "dataset" else 1)
    assert summary.exit_code == 1

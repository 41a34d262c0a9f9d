"""Prompt files: records and rejects from JSONL/parquet, up-front checks, ids, reject log."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eagle_tui.core.capture.prompts import (
    PromptRecord,
    Reject,
    RejectLog,
    open_prompts,
    prompt_file_hash,
)
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.sample_ids import content_sample_id, variant_id

USER = {"role": "user", "content": "What is 2+2?"}
ASSISTANT = {"role": "assistant", "content": "4"}
TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {}}}]


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    path.write_text(text, encoding="utf-8")
    return path


def items(path: Path) -> list[PromptRecord | Reject]:
    return list(open_prompts(path))


def only_reject(path: Path, record: Any) -> Reject:
    (result,) = items(write_jsonl(path, [record]))
    assert isinstance(result, Reject), result
    return result


# -- records ---------------------------------------------------------------------------


def test_openai_record_keeps_id_messages_tools_and_position(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": "a1", "messages": [USER], "tools": TOOLS}])
    (record,) = items(path)
    assert record == PromptRecord("a1", (USER,), tuple(TOOLS), str(path), 1)


def test_integer_id_becomes_text(tmp_path: Path) -> None:
    (record,) = items(write_jsonl(tmp_path / "p.jsonl", [{"id": 7, "messages": [USER]}]))
    assert isinstance(record, PromptRecord) and record.sample_id == "7"


def test_trailing_assistant_turns_are_dropped(tmp_path: Path) -> None:
    messages = [USER, ASSISTANT, USER, ASSISTANT, {"role": "assistant", "content": "!"}]
    (record,) = items(write_jsonl(tmp_path / "p.jsonl", [{"messages": messages}]))
    assert isinstance(record, PromptRecord)
    assert record.messages == (USER, ASSISTANT, USER)


def test_tool_result_may_end_the_prompt(tmp_path: Path) -> None:
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "functions.add:0", "content": "4"}
    (record,) = items(write_jsonl(tmp_path / "p.jsonl", [{"messages": [USER, call, result]}]))
    assert isinstance(record, PromptRecord) and record.messages[-1] == result


def test_content_hash_id_is_stable_and_ignores_trailing_assistant(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [
        {"messages": [USER]}, {"messages": [USER, ASSISTANT], "tools": TOOLS},
    ])
    first, second = items(path)
    assert isinstance(first, PromptRecord) and isinstance(second, PromptRecord)
    assert first.sample_id == content_sample_id([USER], None)
    assert len(first.sample_id) == 16 and int(first.sample_id, 16) >= 0
    assert second.sample_id == content_sample_id([USER], TOOLS) != first.sample_id


def test_sharegpt_converts_roles_and_matches_openai_id(tmp_path: Path) -> None:
    sharegpt = {"system": "Be brief.", "conversations": [
        {"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"},
        {"from": "function_call", "value": '{"name": "add", "arguments": {"a": 1}}'},
        {"from": "observation", "value": "2"}, {"from": "gpt", "value": "done"},
    ]}
    (record,) = items(write_jsonl(tmp_path / "p.jsonl", [sharegpt]))
    assert isinstance(record, PromptRecord)
    assert [m["role"] for m in record.messages] == ["system", "user", "assistant", "assistant",
                                                    "tool"]
    call = record.messages[3]["tool_calls"][0]["function"]
    assert call == {"name": "add", "arguments": '{"a": 1}'}
    openai = {"messages": list(record.messages)}
    (again,) = items(write_jsonl(tmp_path / "o.jsonl", [openai]))
    assert isinstance(again, PromptRecord) and again.sample_id == record.sample_id


def test_blank_lines_are_skipped_and_line_numbers_are_physical(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", ["", {"messages": [USER]}, "   ", "{bad"])
    record, reject = items(path)
    assert isinstance(record, PromptRecord) and record.line == 2
    assert isinstance(reject, Reject) and reject.line == 4


def test_gzip_jsonl_is_read(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": "z", "messages": [USER]}) + "\n")
    (record,) = items(path)
    assert isinstance(record, PromptRecord) and record.sample_id == "z"
    assert open_prompts(path).count() == 1


def test_parquet_struct_messages_drop_null_keys_and_match_jsonl_ids(tmp_path: Path) -> None:
    rows = [{"messages": [USER, {"role": "assistant", "content": "4"}]},
            {"messages": [{"role": "user", "content": "x", "name": "bob"}], "id": None}]
    path = tmp_path / "p.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    first, second = items(path)
    assert isinstance(first, PromptRecord) and isinstance(second, PromptRecord)
    assert first.messages == (USER,)  # the struct's "name": null is gone
    assert second.messages == ({"role": "user", "content": "x", "name": "bob"},)
    assert (first.line, second.line) == (1, 2)
    assert first.sample_id == content_sample_id([USER], None)


def test_parquet_json_string_columns(tmp_path: Path) -> None:
    table = pa.table({"id": ["s1"], "conversations": [json.dumps([{"from": "human",
                                                                    "value": "hi"}])],
                      "tools": [json.dumps(TOOLS)]})
    path = tmp_path / "p.parquet"
    pq.write_table(table, path)
    (record,) = items(path)
    assert isinstance(record, PromptRecord)
    assert record.messages == ({"role": "user", "content": "hi"},)
    assert record.tools == tuple(TOOLS)


# -- rejects ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "reason_part"),
    [
        ("{not json", "not valid JSON"),
        ([1, 2], "not an object"),
        ({"id": "x"}, "no 'messages'"),
        ({"messages": "hello"}, "not valid JSON"),
        ({"messages": {"role": "user"}}, "must be a list"),
        ({"messages": []}, "is empty"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role is 'robot'"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content must be"),
        ({"messages": [{"role": "user"}]}, "messages[0] (user) has no content"),
        ({"messages": [USER, {"role": "assistant", "content": "", "tool_calls": {}}]},
         "messages[1].tool_calls must be a list"),
        ({"messages": [ASSISTANT]}, "no user turn"),
        ({"messages": [{"role": "system", "content": "s"}]}, "no user turn"),
        ({"id": True, "messages": [USER]}, "'id' must be a string or an integer"),
        ({"id": " ", "messages": [USER]}, "'id' is empty"),
        ({"messages": [USER], "tools": {"a": 1}}, "'tools' must be a list"),
        ({"messages": [USER], "tools": [1]}, "tools[0] is a JSON number"),
        ({"conversations": [{"from": "alien", "value": "x"}]}, "conversations[0].from is"),
        ({"conversations": [{"from": "human", "value": 3}]}, "value must be a string"),
        ({"conversations": [{"from": "human", "value": "q"},
                            {"from": "function_call", "value": "nope"}]}, "not JSON"),
    ],
)
def test_malformed_record_is_rejected_with_reason(
    tmp_path: Path, record: Any, reason_part: str
) -> None:
    reject = only_reject(tmp_path / "p.jsonl", record)
    assert reason_part in reject.reason
    assert reject.line == 1 and reject.source == str(tmp_path / "p.jsonl")


def test_batch_goes_on_after_rejects(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [
        {"id": 1, "messages": [USER]}, "{", {"messages": 3}, {"id": 2, "messages": [USER]},
    ])
    kinds = [(type(x).__name__, x.line) for x in items(path)]
    assert kinds == [("PromptRecord", 1), ("Reject", 2), ("Reject", 3), ("PromptRecord", 4)]


def test_duplicate_sample_id_is_rejected_naming_the_first_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"messages": [USER]}, {"messages": [USER]},
                                             {"id": "k", "messages": [USER]}])
    first, dup, other = items(path)
    assert isinstance(first, PromptRecord) and isinstance(other, PromptRecord)
    assert isinstance(dup, Reject) and "first at line 1" in dup.reason
    assert dup.sample_id == first.sample_id


def test_invalid_utf8_line_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"messages": "\xff"}\n' + json.dumps({"messages": [USER]}).encode())
    reject, record = items(path)
    assert isinstance(reject, Reject) and "not UTF-8" in reject.reason
    assert isinstance(record, PromptRecord)


# -- up-front checks -------------------------------------------------------------------


def test_missing_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.jsonl does not exist"):
        open_prompts(tmp_path / "nope.jsonl")


def test_directory_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        open_prompts(tmp_path)


@pytest.mark.parametrize("content", [b"", b"\n  \n\n"])
def test_empty_file_is_a_config_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=str(path)):
        open_prompts(path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"messages": [USER]}])
    path.chmod(0)
    with pytest.raises(ConfigError, match="cannot read prompt file"):
        open_prompts(path)


def test_parquet_without_messages_column_or_rows_is_a_config_error(tmp_path: Path) -> None:
    pq.write_table(pa.table({"text": ["x"]}), tmp_path / "a.parquet")
    with pytest.raises(ConfigError, match="no 'messages' or 'conversations' column"):
        open_prompts(tmp_path / "a.parquet")
    pq.write_table(pa.table({"messages": pa.array([], pa.string())}), tmp_path / "b.parquet")
    with pytest.raises(ConfigError, match="has no rows"):
        open_prompts(tmp_path / "b.parquet")


def test_broken_parquet_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "p.parquet"
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(ConfigError, match="as parquet"):
        open_prompts(path)


# -- streaming, hash, count ------------------------------------------------------------


def test_reading_the_first_record_does_not_load_the_file(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    line = json.dumps({"messages": [{"role": "user", "content": "x" * 1000}]}) + "\n"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(json.dumps({"messages": [USER]}) + "\n")
        handle.writelines(line for _ in range(20_000))  # ~20 MB
    tracemalloc.start()
    first = next(iter(open_prompts(path)))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert isinstance(first, PromptRecord)
    assert peak < 2_000_000


def test_prompt_file_hash_is_sha256_of_bytes(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"messages": [USER]}])
    assert prompt_file_hash(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    assert open_prompts(path).sha256() == prompt_file_hash(path)
    with pytest.raises(ConfigError, match="cannot read prompt file"):
        prompt_file_hash(tmp_path / "missing.jsonl")


def test_count_counts_non_blank_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"messages": [USER]}, "", "{bad"])
    assert open_prompts(path).count() == 2


# -- variant ids -----------------------------------------------------------------------


def test_variant_id_suffixes_only_when_needed() -> None:
    assert variant_id("a") == "a"
    assert variant_id("a", repeat=2) == "a#r2"
    assert variant_id("a", preset="t07", repeat=1) == "a#t07#r1"
    with pytest.raises(ValueError, match="repeat"):
        variant_id("a", repeat=-1)


# -- reject log ------------------------------------------------------------------------


def test_reject_log_flushes_each_line_and_skips_known_rejects(tmp_path: Path) -> None:
    path = tmp_path / "rejects.jsonl"
    log = RejectLog(path)
    assert log.write(Reject("p.jsonl", 3, "bad JSON")) is True
    assert json.loads(path.read_text()) == {"source": "p.jsonl", "line": 3,
                                            "reason": "bad JSON", "sample_id": None}
    log.close()
    with RejectLog(path) as again:
        assert again.count == 1
        assert again.write(Reject("p.jsonl", 3, "bad JSON")) is False
        assert again.write(Reject("p.jsonl", 4, "no user turn", "k")) is True
    assert len(path.read_text().splitlines()) == 2


def test_reject_log_recovers_from_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "rejects.jsonl"
    path.write_text('{"source": "p", "line": 1, "reason": "x"}\n{"source": "p", "li')
    with RejectLog(path) as log:
        assert log.count == 1
        log.write(Reject("p", 2, "y"))
    last = path.read_text().splitlines()[-1]
    assert json.loads(last)["line"] == 2


def test_rejects_are_reject_structs_read_back_whatever_wrote_them(tmp_path: Path) -> None:
    """A line the hand-written encoder of f2cd8f4 wrote (spaced, non-ASCII raw, a lone
    surrogate as its ``\\udXXX`` escape) still counts; new lines, a lone surrogate
    included, read back as the same ``Reject``."""
    path = tmp_path / "rejects.jsonl"
    path.write_text('{"source": "p\u00e9.jsonl", "line": 1, "reason": "lone \\udc80", '
                    '"sample_id": "\u00e9"}\n', encoding="utf-8")
    odd = Reject("p\u00e9.jsonl", 2, "lone \udc80 surrogate \u2028", "id\udcff")
    plain = Reject("p\u00e9.jsonl", 3, "\u00abtrop long\u00bb")
    with RejectLog(path) as log:
        assert log.count == 1 and not log.write(Reject("p\u00e9.jsonl", 1, "again"))
        assert log.write(odd) and log.write(plain)
    lines = path.read_text(encoding="utf-8").rstrip("\n").split("\n")  # U+2028 is no break
    assert [msgspec.convert(json.loads(line), Reject) for line in lines[1:]] == [odd, plain]
    assert lines[2] == '{"source":"p\u00e9.jsonl","line":3,"reason":"\u00abtrop long\u00bb",' \
        '"sample_id":null}'
    with RejectLog(path) as again:
        assert again.count == 3

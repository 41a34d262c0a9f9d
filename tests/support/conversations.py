"""Multi-turn test data: a tokenizer directory with the Kimi-K2.5 history-rules template
(tests/fixtures/kimi_k25_rules), conversations with tool calls and results, and an
independent check that every stored prompt is the rendering of its history with the model's
own earlier answers in it."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

from eagle_tui.core import kimi
from eagle_tui.core.tokenizer import LoadedTokenizer, bundled_tokenizer_path

ROOT = Path(__file__).resolve().parents[2]
RULES_TEMPLATE = ROOT / "tests" / "fixtures" / "kimi_k25_rules" / "chat_template.jinja"

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


def rules_tokenizer_dir(into: Path) -> Path:
    """The bundled tokenizer with the history-rules chat template, in ``into``."""
    target = into / "kimi-rules-tokenizer"
    shutil.copytree(bundled_tokenizer_path(), target)
    config_path = target / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = RULES_TEMPLATE.read_text()
    config_path.write_text(json.dumps(config, indent=1))
    return target


def call(call_id: str, city: str) -> dict[str, Any]:
    """A dataset tool call of get_weather."""
    return {"id": call_id, "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}


def conversation(i: int) -> dict[str, Any]:
    """Record ``i``: three shapes in turn (a tool loop, plain chat, tools declared but answered
    plainly by the dataset)."""
    kind = i % 3
    if kind == 0:  # the canonical call (Paris): the sim matches it about half of the time
        city = "Paris" if i % 2 == 0 else f"Town{i}"
        return {"id": f"c{i:04d}", "tools": [WEATHER], "messages": [
            {"role": "user", "content": f"weather in {city}? ({i})"},
            {"role": "assistant", "content": "", "reasoning_content": "need the tool",
             "tool_calls": [call(f"call_{i}_a", city)]},
            {"role": "tool", "tool_call_id": f"call_{i}_a", "content": "sunny, 21 C"},
            {"role": "assistant", "content": "It is sunny.", "reasoning_content": "easy"},
            {"role": "user", "content": "and tomorrow?"},
            {"role": "assistant", "content": "Probably rain."}]}
    if kind == 1:
        return {"id": f"c{i:04d}", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": f"hello {i}"},
            {"role": "assistant", "content": "Hi!", "reasoning_content": "greet"},
            {"role": "user", "content": "tell me more"},
            {"role": "assistant", "content": "More."},
            {"role": "user", "content": "thanks"}]}
    return {"id": f"c{i:04d}", "tools": [WEATHER], "messages": [
        {"role": "user", "content": f"just chat {i}"},
        {"role": "assistant", "content": "Sure."},
        {"role": "user", "content": "ok"},
        {"role": "assistant", "content": "Bye."}]}


def write_conversations(path: Path, count: int) -> list[dict[str, Any]]:
    records = [conversation(i) for i in range(count)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def own_parse(output: list[int], tokenizer: LoadedTokenizer, *,
              thinking: bool = True) -> dict[str, Any]:
    """The model's answer as an assistant message, parsed here independently of the code
    under test: split at </think> (when the prompt opened reasoning), the tool section and
    each call by id."""
    body = output[:-1] if output and output[-1] == kimi.IM_END else output
    end = body.index(kimi.THINK_END) if thinking else -1
    reasoning, rest = body[:max(end, 0)], body[end + 1:]
    calls: list[dict[str, Any]] = []
    if kimi.TOOL_CALLS_SECTION_BEGIN in rest:
        begin = rest.index(kimi.TOOL_CALLS_SECTION_BEGIN)
        section = rest[begin + 1: rest.index(kimi.TOOL_CALLS_SECTION_END)]
        rest = rest[:begin]
        while kimi.TOOL_CALL_BEGIN in section:
            start = section.index(kimi.TOOL_CALL_BEGIN)
            middle = section.index(kimi.TOOL_CALL_ARGUMENT_BEGIN)
            stop = section.index(kimi.TOOL_CALL_END)
            call_id = tokenizer.decode(section[start + 1: middle]).strip()
            name = call_id.removeprefix("functions.").rsplit(":", 1)[0]
            calls.append({"id": call_id, "type": "function", "function": {
                "name": name, "arguments": tokenizer.decode(section[middle + 1: stop])}})
            section = section[stop + 1:]
    message: dict[str, Any] = {"role": "assistant", "content": tokenizer.decode(rest)}
    if thinking:
        message["reasoning_content"] = tokenizer.decode(reasoning)
    if calls:
        message["tool_calls"] = calls
    return message


def turn_starts(messages: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(start, end) of each assistant run after a user message, plus the open end."""
    spans, seen_user, i = [], False, 0
    while i < len(messages):
        if messages[i]["role"] == "assistant" and seen_user:
            j = i
            while j < len(messages) and messages[j]["role"] == "assistant":
                j += 1
            spans.append((i, j))
            i = j
            continue
        seen_user = seen_user or messages[i]["role"] == "user"
        i += 1
    if messages[-1]["role"] != "assistant":
        spans.append((len(messages), len(messages)))
    return spans


def check_model_histories(rows: list[dict[str, Any]], records: list[dict[str, Any]],
                          tokenizer: LoadedTokenizer, **template_kwargs: Any) -> int:
    """Every stored prompt equals the rendering of its history rebuilt here: the dataset's
    messages with each earlier turn replaced by the model's own answer (from the stored
    rows), tool results re-addressed to the model's call ids. Returns turns checked."""
    by_conversation: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        by_conversation[row["conversation_id"]][row["turn"]] = row
    by_id = {r["id"]: r for r in records}
    checked = 0
    for conversation_id, turns in by_conversation.items():
        record = by_id[conversation_id.split("#")[0]]
        messages, spans = record["messages"], turn_starts(record["messages"])
        assert sorted(turns) == list(range(len(turns))), (conversation_id, sorted(turns))
        history: list[dict[str, Any]] = []
        cursor, renamed = 0, {}
        for k in sorted(turns):
            row = turns[k]
            start, end = spans[k]
            for m in messages[cursor:start]:
                if m["role"] == "tool" and m.get("tool_call_id") in renamed:
                    m = {**m, "tool_call_id": renamed[m["tool_call_id"]]}
                history.append(m)
            expected = tokenizer.hf.apply_chat_template(
                history, tools=record.get("tools"), add_generation_prompt=True,
                tokenize=True, return_dict=False, **template_kwargs)
            prompt = row["input_ids"][: row["prompt_len"]]
            assert prompt == list(expected), (conversation_id, k)
            assert row["parent_id"] == (turns[k - 1]["sample_id"] if k else None)
            checked += 1
            cursor = end
            if k + 1 not in turns:
                continue
            answer = own_parse(row["input_ids"][row["prompt_len"]:], tokenizer,
                               thinking=prompt[-1] == kimi.THINK)
            if "tool_call_diverged" not in row["flags"]:
                dataset_ids = [c["id"] for m in messages[start:end]
                               for c in m.get("tool_calls") or []]
                model_ids = [c["id"] for c in answer.get("tool_calls", [])]
                renamed.update(zip(dataset_ids, model_ids, strict=False))
                history.append(answer)
            else:
                history.extend(messages[start:end])
    return checked

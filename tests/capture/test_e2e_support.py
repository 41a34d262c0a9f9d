"""Helpers of the end-to-end capture tests (no tests here): mixed prompt files, running the
CLI as a separate process, and checking the rows against their prompts."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from eagle_tui.core.capture.prompts import PromptRecord, open_prompts
from eagle_tui.core.tokenizer import LoadedTokenizer

ROOT = Path(__file__).resolve().parents[2]

TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


def _good_record(i: int, rng: random.Random) -> dict[str, Any]:
    kind = i % 6
    words = " ".join(rng.choice(["why", "how", "sky", "blue", "sea"])
                     for _ in range(rng.randint(1, 12)))
    question = f"question {i}: {words}"
    if kind == 0:
        return {"id": f"s{i:05d}", "messages": [{"role": "user", "content": question}]}
    if kind == 1:
        return {"id": f"s{i:05d}", "messages": [
            {"role": "system", "content": "Be brief."}, {"role": "user", "content": question}]}
    if kind == 2:  # multi-turn
        return {"id": f"s{i:05d}", "messages": [
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "Hi! How can I help?"},
            {"role": "user", "content": question}]}
    if kind == 3:  # tools declared
        return {"id": f"s{i:05d}", "tools": [TOOL],
                "messages": [{"role": "user", "content": f"weather in city {i}?"}]}
    if kind == 4:  # a tool loop: the call and its result, then the answer is generated
        call = {"id": "functions.get_weather:0", "type": "function",
                "function": {"name": "get_weather", "arguments": f'{{"city": "c{i}"}}'}}
        return {"id": f"s{i:05d}", "tools": [TOOL], "messages": [
            {"role": "user", "content": f"weather in c{i}?"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "sunny"}]}
    return {"conversations": [{"from": "human", "value": question},  # ShareGPT, no id
                              {"from": "gpt", "value": "old answer, regenerated"}]}


BAD_LINES = (
    '{"id": "x", "messages": [',
    '{"id": "y", "messages": []}',
    '{"id": "z", "messages": [{"role": "wizard", "content": "hi"}]}',
    '["not", "an", "object"]',
    '{"id": "s00000", "messages": [{"role": "user", "content": "duplicate id"}]}',
)


def write_mixed_prompts(path: Path, count: int, *, seed: int = 7) -> set[int]:
    """``count`` lines: mostly good records of six shapes, about 1 in 40 malformed.

    Returns the (1-based) line numbers of the malformed ones.
    """
    rng = random.Random(seed)
    lines, bad = [], set()
    for i in range(count):
        if i > 0 and i % 40 == 17:
            lines.append(BAD_LINES[(i // 40) % len(BAD_LINES)])
            bad.add(i + 1)
        else:
            lines.append(json.dumps(_good_record(i, rng)))
    path.write_text("\n".join(lines) + "\n")
    return bad


def good_records(path: Path) -> dict[str, PromptRecord]:
    """The prompt file's usable records by sample id (as the engine reads them)."""
    return {r.sample_id: r for r in open_prompts(path) if isinstance(r, PromptRecord)}


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 240.0) -> (
    subprocess.CompletedProcess[str]
):
    """``eagle-tui capture ARGS`` in a separate process, plain display."""
    return subprocess.run(
        [sys.executable, "-m", "eagle_tui.tui.cli", "capture", "--display", "plain", *args],
        capture_output=True, text=True, cwd=ROOT, env=cli_env(env), timeout=timeout,
    )


def start_cli(*args: str, log: Path, env: dict[str, str] | None = None) -> (
    subprocess.Popen[bytes]
):
    """Like :func:`run_cli`, without waiting; stderr goes to ``log``."""
    with open(log, "ab") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "eagle_tui.tui.cli", "capture", "--display", "plain", *args],
            stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT, env=cli_env(env),
        )


def cli_env(extra: dict[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


def check_prompt_ids(rows: list[dict[str, Any]], records: dict[str, PromptRecord],
                     tokenizer: LoadedTokenizer) -> None:
    """Every row's prompt part is exactly the tokenizer's rendering of its record."""
    for row in rows:
        record = records[row["sample_id"].split("#")[0]]
        rendered = tokenizer.render(record.messages, record.tools)
        assert row["input_ids"][: row["prompt_len"]] == rendered, row["sample_id"]

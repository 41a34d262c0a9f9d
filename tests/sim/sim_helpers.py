"""Shared helpers of the sim tests: Kimi-format prompts, recordings, §6 log regexes."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any, Final

from tokenizers import Tokenizer

from eagle_tui.core import kimi

ROOT: Final = Path(__file__).resolve().parents[2]
MODEL_DIR: Final = ROOT / "core" / "tokenizer" / "assets" / "kimi-k2.5-tiny"
RECORDINGS: Final = ROOT / "tests" / "fixtures" / "realsrv"

# SGLang 0.5.23's log-line shapes (ARGS also accepts the dict form the 0.5.23 recording shows)
PREFIX: Final = re.compile(
    r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?)"
    r"((?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] (.*)$"
)
PHASE_PATTERNS: Final = {
    "ARGS": r"server_args=(?:ServerArgs\(|\{)",
    "WEIGHT_BEG": r"Load weight begin\. avail mem=([\d.]+) GB",
    "SHARDS": r"(Loading safetensors checkpoint shards|Multi-thread loading shards|"
              r"Loading pt checkpoint shards):\s+(\d+)% Completed \| (\d+)/(\d+) \[",
    "WEIGHT_END": r"Load weight end\. (?:elapsed=([\d.]+) s, )?type=(\w+),.*?"
                  r"avail mem=([\d.]+) GB, mem usage=([\d.]+) GB\.",
    "KV_ALLOC": r"KV Cache (?:is allocated|VA upper bound)\. (?:dtype: \S+, )?#tokens: (\d+), "
                r"(?:K size: ([\d.]+) GB, V size: ([\d.]+) GB|KV size: ([\d.]+) GB)",
    "POOL_END": r"Memory pool end\. avail mem=([\d.]+) GB",
    "GRAPH_BEG": r"Capture (?:(target|draft) (decode|verify|prefill) )?(?:cuda|CUDA) graph begin\.",
    "GRAPH_BAR": r"Capturing batches \(bs=(\d+) avail_mem=([\d.]+) GB\):\s+(\d+)%",
    "GRAPH_END": r"Capture (?:(target|draft) (decode|verify|prefill) )?(?:cuda|CUDA) graph end\. "
                 r"(?:bs=\[[^\]]*\], )?(?:elapsed=|Time elapsed: )([\d.]+) s",
    "SCHED_INFO": r"max_total_num_tokens=(\d+), chunked_prefill_size=(-?\d+), "
                  r"max_prefill_tokens=(\d+), max_running_requests=(\d+), context_len=(\d+)",
    "UV_START": r"Started server process \[(\d+)\]",
    "UV_APP": r"Application startup complete\.",
    "UV_BIND": r"Uvicorn running on (https?)://(\S+):(\d+) \(Press CTRL\+C to quit\)",
    "WARMUP_REQ": r'"POST /generate HTTP/1\.1" 200',
    "READY": r"The server is fired up and ready to roll!",
}
RUN_PREFILL: Final = re.compile(
    r"Prefill batch.*#new-seq: (\d+), #new-token: (\d+), #cached-token: (\d+).*"
    r"#running-req: (\d+), #queue-req: (\d+)"
)
RUN_DECODE: Final = re.compile(r"Decode batch.*#running-req: (\d+)")
FATAL_PATTERNS: Final = {
    "SIGQUIT_CHILD": r"Received sigquit from a child process\. It usually means the child failed\.",
    "SIGQUIT_RUN": r"SIGQUIT received\. .*It usually means one child failed\.",
    "SCHED_EXC": r"Scheduler hit an exception:",
    "RANK_DIED": r"Rank (\d+) scheduler died during initialization \(exit code: (-?\d+)\)",
    "INIT_FAIL": r"Initialization failed\.",
    "GRAPH_FAIL": r"Capture (?:cuda|CUDA) graph failed",
    "NOT_ENOUGH_MEM": r"Not enough memory\. Please try to increase --mem-fraction-static",
    "CUDA_OOM": r"(?:OutOfMemoryError: )?CUDA out of memory|CUDA error: out of memory",
    "ADDR_IN_USE": r"\[Errno 98\].*address already in use",
    "NCCL": r"NCCL error|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|"
            r"Watchdog caught collective operation timeout|DistBackendError",
    "SHUTDOWN": r"SIGTERM received\.|Gracefully exiting\.\.\. Remaining number of requests (\d+)",
    "TRACEBACK": r"^Traceback \(most recent call last\):",
}


@cache
def tokenizer() -> Any:
    """The bundled Kimi-shaped tokenizer (``tokenizers`` library, no transformers)."""
    return Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))


def encode(text: str) -> list[int]:
    """Ids of ``text`` without special tokens."""
    return list(tokenizer().encode(text, add_special_tokens=False).ids)


def decode(ids: list[int]) -> str:
    """Text of ``ids`` with every token shown."""
    return str(tokenizer().decode(ids, skip_special_tokens=False))


def chat_prompt(user: str = "What is the capital of France?", *, tools: list[Any] | None = None,
                tool_result: str | None = None, think: bool = True) -> list[int]:
    """A Kimi-K2.5-style prompt, ending with ``<think>`` when ``think``."""
    ids: list[int] = []
    if tools is not None:
        ids += [kimi.IM_SYSTEM, *encode("tool_declare"), kimi.IM_MIDDLE,
                *encode(json.dumps(tools)), kimi.IM_END]
    ids += [kimi.IM_SYSTEM, *encode("system"), kimi.IM_MIDDLE, *encode("You are Kimi."),
            kimi.IM_END, kimi.IM_USER, *encode("user"), kimi.IM_MIDDLE, *encode(user),
            kimi.IM_END]
    if tool_result is not None:
        ids += [kimi.IM_ASSISTANT, *encode("assistant"), kimi.IM_MIDDLE, kimi.THINK,
                kimi.THINK_END, kimi.TOOL_CALLS_SECTION_BEGIN, kimi.TOOL_CALL_BEGIN,
                *encode("functions.get_weather:0"), kimi.TOOL_CALL_ARGUMENT_BEGIN,
                *encode('{"city": "Paris"}'), kimi.TOOL_CALL_END, kimi.TOOL_CALLS_SECTION_END,
                kimi.IM_END, kimi.IM_SYSTEM, *encode("tool"), kimi.IM_MIDDLE,
                *encode(f"## Return of functions.get_weather:0\n{tool_result}"), kimi.IM_END]
    ids += [kimi.IM_ASSISTANT, *encode("assistant"), kimi.IM_MIDDLE]
    return ids + ([kimi.THINK] if think else [kimi.THINK, kimi.THINK_END])


WEATHER_TOOLS: Final = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]},
}}]


def recording(name: str) -> dict[str, Any]:
    """A recorded real-server exchange from tests/fixtures/realsrv."""
    data: dict[str, Any] = json.loads((RECORDINGS / name).read_text(encoding="utf-8"))
    return data


def key_shape(value: Any) -> Any:
    """The key structure of a JSON value (keys in order, leaves reduced to their type)."""
    if isinstance(value, dict):
        return [(key, key_shape(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [key_shape(value[0])] if value else []
    return type(value).__name__ if value is not None else "null"


def sse_payloads(body: str) -> list[str]:
    """The ``data:`` payloads of an SSE body, checking SGLang's exact framing."""
    assert body.endswith("data: [DONE]\n\n"), body[-200:]
    events = body.split("\n\n")
    assert events[-1] == ""
    payloads = []
    for event in events[:-1]:
        assert event.startswith("data: ") and "\n" not in event, event[:200]
        payloads.append(event[len("data: "):])
    return payloads


def sse_chunks(body: str) -> list[dict[str, Any]]:
    """The JSON chunks of an SSE body (``[DONE]`` must come last and only there)."""
    payloads = sse_payloads(body)
    assert payloads[-1] == "[DONE]" and "[DONE]" not in payloads[:-1]
    return [json.loads(payload) for payload in payloads[:-1]]

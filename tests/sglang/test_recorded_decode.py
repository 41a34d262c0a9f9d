"""Every recorded real-SGLang ``/generate`` answer (tests/fixtures/realsrv) decodes to exactly
what it decoded to at commit 1825cd6, field for field (``meta`` included), streams too.

``tests/fixtures/realsrv_decoded_1825cd6.json`` was written by this module's ``decode_all``
against that commit's decoder (``EAGLE_WRITE_DECODED=1 pytest`` this file).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import httpx

from eagle_tui.core import errors
from eagle_tui.core.sglang import GenerateRequest, GenerateResult, SamplingParams, SGLangClient
from eagle_tui.core.urls import ServerURL

FIXTURES = Path(__file__).parent.parent / "fixtures"
RECORDED = FIXTURES / "realsrv"
GOLDEN = FIXTURES / "realsrv_decoded_1825cd6.json"
REQUEST = GenerateRequest(input_ids=[1, 2, 3], sampling=SamplingParams(max_new_tokens=8), rid="r1")

BODIES = [
    "generate_input_ids.json", "generate_input_ids_repeat.json", "generate_logprobs.json",
    "generate_no_skip_special.json", "generate_sampled_seed.json", "generate_stop_token.json",
    "generate_text.json", "generate_batch.json[0]", "generate_batch.json[1]",
    "generate_skip_tokenizer_init_dummy_weights.json",
    "script_model/generate_eos.json", "script_model/generate_ignore_eos.json",
    "script_model/generate_length.json", "script_model/generate_stop_string.json",
]
STREAMS = [
    "generate_stream.json", "generate_stream_skip_tokenizer_init.txt",
    "script_model/generate_stream_incremental.txt",
]


def _body(name: str) -> bytes:
    """The recorded body; ``file[i]`` is item i of a batch answer, as a one-item list."""
    name, _, item = name.partition("[")
    data = json.loads((RECORDED / name).read_text())
    if isinstance(data, dict) and "request" in data and "body" in data:
        data = data["body"]
    if item:
        data = [data[int(item.rstrip("]"))]]
    return json.dumps(data).encode()


def _stream(name: str) -> bytes:
    path = RECORDED / name
    if path.suffix == ".json":
        lines = json.loads(path.read_text())["body"]
    else:
        lines = path.read_text().splitlines()
    return "".join(f"{line}\n\n" for line in lines if line.startswith("data:")).encode()


def _plain(result: GenerateResult) -> dict[str, Any]:
    data = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    data.pop("latency_s")  # measured by the client
    data["output_ids"] = list(result.output_ids)
    finish = result.finish
    data["finish"] = {"kind": finish.kind, "matched": finish.matched, "length": finish.length,
                      "message": finish.message, "status_code": finish.status_code}
    return data


async def _decode(content: bytes, *, stream: bool) -> dict[str, Any]:
    headers = {"content-type": "text/event-stream"} if stream else {}
    transport = httpx.MockTransport(lambda r: httpx.Response(200, content=content, headers=headers))
    deltas: list[list[int]] = []
    async with SGLangClient(ServerURL.parse("http://sglang.test"), transport=transport) as client:
        try:
            if stream:
                result = await client.generate_streaming(
                    REQUEST, lambda d: deltas.append(list(d.new_ids)))
            else:
                result = await client.generate(REQUEST)
        except errors.RequestAborted as e:
            return {"aborted": str(e), "partial": _plain(e.partial)}
    return {"result": _plain(result), "deltas": deltas}


async def decode_all() -> dict[str, Any]:
    decoded = {name: await _decode(_body(name), stream=False) for name in BODIES}
    decoded.update({name: await _decode(_stream(name), stream=True) for name in STREAMS})
    return json.loads(json.dumps(decoded))  # tuples as lists, as in the file


async def test_recorded_answers_decode_as_they_did() -> None:
    decoded = await decode_all()
    if os.environ.get("EAGLE_WRITE_DECODED"):
        GOLDEN.write_text(json.dumps(decoded, indent=1, sort_keys=True) + "\n")
    golden = json.loads(GOLDEN.read_text())
    assert sorted(decoded) == sorted(golden)
    for name, expected in golden.items():
        assert decoded[name] == expected, name

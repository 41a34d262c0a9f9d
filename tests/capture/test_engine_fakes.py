"""Shared helpers of the engine and dispatch tests (no tests here).

``FakeSGLang`` answers the real ``SGLangClient`` in process through ``httpx.MockTransport``
with SGLang's own body shapes, so the engine's whole request path (client, error mapping,
retries, pool) runs without sockets. Faults are scripted per request: push names onto
``faults`` (consumed one per ``/generate``) or set ``fault_for`` to choose by prompt.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from eagle_tui.core import kimi
from eagle_tui.core.capture.config import CaptureConfig, RetryPolicy
from eagle_tui.core.capture.engine import CaptureEngine, CaptureSummary
from eagle_tui.core.sglang import SGLangClient
from eagle_tui.core.shards.reader import ShardReader
from eagle_tui.core.tokenizer import LoadedTokenizer, bundled_tokenizer_path, load_tokenizer
from eagle_tui.core.urls import ServerURL

ANSWER_LEN = 5


def expected_output(prompt: list[int]) -> list[int]:
    """What the fake model answers to ``prompt``: reasoning, </think>, answer, <|im_end|>."""
    seed = sum(prompt) % 997
    reasoning = [1000 + (seed + i) % 500 for i in range(3)]
    answer = [2000 + (seed * 7 + i) % 500 for i in range(ANSWER_LEN)]
    return [*reasoning, kimi.THINK_END, *answer, kimi.IM_END]


def _error(status: int, message: str) -> httpx.Response:
    body = {"object": "error", "message": message, "type": str(status), "param": None,
            "code": status}
    return httpx.Response(status, json=body)


class FakeSGLang:
    """An in-process SGLang stand-in at ``url``; see the module docstring."""

    def __init__(self, url: str = "http://fake-a:30000") -> None:
        self.url = url
        self.faults: deque[str] = deque()
        self.fault_for: Callable[[list[int]], str | None] = lambda prompt: None
        self.healthy = True
        self.health_checks = 0
        self.bodies: list[dict[str, Any]] = []
        self.aborts: list[dict[str, Any]] = []
        self.auth_headers: set[str] = set()
        self.in_flight = 0
        self.rids_in_flight: set[str | None] = set()
        self.max_in_flight = 0
        self.gate: asyncio.Event | None = None
        self._hanging: dict[str, asyncio.Event] = {}
        self.started = asyncio.Event()

    def client(self, **kwargs: Any) -> SGLangClient:
        """A real client whose transport is this fake."""
        return SGLangClient(ServerURL.parse(self.url), transport=httpx.MockTransport(self.handle),
                            **kwargs)

    @property
    def generate_bodies(self) -> list[dict[str, Any]]:
        """Bodies of every /generate request so far."""
        return [b for b in self.bodies if "input_ids" in b]

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.auth_headers.add(request.headers.get("authorization", ""))
        path = request.url.path
        if path == "/health":
            self.health_checks += 1
            return httpx.Response(200 if self.healthy else 503)
        if path == "/model_info":
            return httpx.Response(200, json={"model_path": "/models/fake-kimi"})
        if path == "/server_info":
            return httpx.Response(200, json={"version": "0.5.23-fake"})
        if path == "/abort_request":
            return self._abort(json.loads(request.content))
        if path == "/generate":
            return await self._generate(json.loads(request.content))
        return httpx.Response(404)

    def _abort(self, body: dict[str, Any]) -> httpx.Response:
        """As SGLang 0.5.23 (docs/sim.md): dropped unless that exact rid is in flight; then
        every rid that starts with it is aborted."""
        self.aborts.append(body)
        prefix = str(body.get("rid", ""))
        if not body.get("abort_all") and prefix not in self.rids_in_flight:
            return httpx.Response(200)
        for rid, event in self._hanging.items():
            if body.get("abort_all") or (prefix and rid.startswith(prefix)):
                event.set()
        return httpx.Response(200)

    async def _generate(self, body: dict[str, Any]) -> httpx.Response:
        self.bodies.append(body)
        self.in_flight += 1
        self.rids_in_flight.add(body.get("rid"))
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.started.set()
        try:
            return await self._answer(body)
        finally:
            self.in_flight -= 1
            self.rids_in_flight.discard(body.get("rid"))

    async def _answer(self, body: dict[str, Any]) -> httpx.Response:
        prompt: list[int] = body["input_ids"]
        fault = self.faults.popleft() if self.faults else self.fault_for(prompt)
        if self.gate is not None:
            await self.gate.wait()
        if fault is not None:
            return await self._fault(fault, body)
        return self._success(body, expected_output(prompt), {"type": "stop",
                                                             "matched": kimi.IM_END})

    async def _fault(self, fault: str, body: dict[str, Any]) -> httpx.Response:
        if fault == "503":
            return _error(503, "The request queue is full.")
        if fault == "500":
            return _error(500, "internal server error")
        if fault == "401":
            return httpx.Response(401, json={"error": "Unauthorized"})
        if fault == "ctx":
            message = "The input (99 tokens) is longer than the model's context length (64 tokens)."
            return httpx.Response(400, json={"error": {"message": message}})
        if fault == "garbage":
            return httpx.Response(200, content=b"<html>502 Bad Gateway</html>")
        if fault == "reset":
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        if fault == "refused":
            raise httpx.ConnectError("All connection attempts failed")
        if fault == "abort":
            return self._aborted(body)
        if fault == "hang":
            event = self._hanging.setdefault(body["rid"], asyncio.Event())
            await event.wait()
            return self._aborted(body)
        raise AssertionError(f"unknown fault {fault!r}")

    def _aborted(self, body: dict[str, Any]) -> httpx.Response:
        finish = {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}
        return self._success(body, expected_output(body["input_ids"])[:2], finish)

    def _success(self, body: dict[str, Any], output: list[int], finish: dict[str, Any]) -> (
        httpx.Response
    ):
        meta = {"id": body.get("rid", ""), "finish_reason": finish,
                "prompt_tokens": len(body["input_ids"]), "completion_tokens": len(output),
                "cached_tokens": 0, "e2e_latency": 0.001}
        item = {"text": "", "output_ids": output, "meta_info": meta}
        if not body.get("stream"):
            return httpx.Response(200, json=item)
        chunks = []
        for end in range(1, len(output) + 1):  # cumulative, like SGLang 0.5.23
            last = end == len(output)
            part_meta = {**meta, "completion_tokens": end,
                         "finish_reason": finish if last else None}
            chunk = {"text": "", "output_ids": output[:end], "meta_info": part_meta}
            chunks.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        chunks.append(b"data: [DONE]\n\n")
        return httpx.Response(200, content=b"".join(chunks),
                              headers={"content-type": "text/event-stream"})


def write_prompts(path: Path, count: int, *, bad_every: int = 0, tools_every: int = 0) -> Path:
    """A JSONL prompt file: ``count`` records with ids ``p00000``...; every ``bad_every``-th
    line is malformed JSON, every ``tools_every``-th record declares a tool."""
    lines = []
    for i in range(count):
        if bad_every and i % bad_every == bad_every - 1:
            lines.append('{"id": "broken", "messages": [')
            continue
        record: dict[str, Any] = {
            "id": f"p{i:05d}",
            "messages": [{"role": "user", "content": f"question number {i}"}],
        }
        if tools_every and i % tools_every == 0:
            record["tools"] = [{"type": "function", "function": {
                "name": "lookup", "parameters": {"type": "object", "properties": {}}}}]
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    return path


def make_config(tmp_path: Path, servers: list[str], **overrides: Any) -> CaptureConfig:
    """A config for fast tests: tiny batches, no backoff, quick health re-checks."""
    settings: dict[str, Any] = {
        "prompts": tmp_path / "prompts.jsonl",
        "out_dir": tmp_path / "out",
        "servers": tuple(ServerURL.parse(url) for url in servers),
        "tokenizer": bundled_tokenizer_path(),
        "max_new_tokens": 64,
        "concurrency": 4,
        "retry": RetryPolicy(max_attempts=3, base_delay_s=0.0, max_delay_s=0.0),
        "health_interval_s": 30.0,
        "health_retry_s": 0.01,
        "shard_rows": 50,
        "stop_grace_s": 5.0,
    }
    settings.update(overrides)
    return CaptureConfig(**settings)


@functools.cache
def bundled_tokenizer() -> LoadedTokenizer:
    """The bundled Kimi-shaped tokenizer, loaded once per test session."""
    return load_tokenizer(bundled_tokenizer_path())


def rows_of(out_dir: Path) -> list[dict[str, Any]]:
    """Every row of the batch's trusted shards, as dicts."""
    reader = ShardReader(out_dir)
    try:
        return list(reader.iter_rows())
    finally:
        reader.close()


async def capture(config: CaptureConfig, fakes: list[FakeSGLang], tokenizer: LoadedTokenizer,
                  **kwargs: Any) -> CaptureSummary:
    """Run a whole batch against ``fakes`` (matched to the config's servers by URL)."""
    by_url = {f.url: f for f in fakes}
    engine = CaptureEngine(config, tokenizer=tokenizer,
                           client_factory=lambda url: by_url[url.public].client(), **kwargs)
    return await engine.run()

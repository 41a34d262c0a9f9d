"""Record a real SGLang server's acceptance artefacts as test fixtures (stdlib only).

    python record_spec.py URL OUT_DIR --log SERVER_LOG [--model DIR] [--no-spec]

Against a server from ``realsglang.sh start-spec script --enable-metrics --decode-log-interval 1``
(or plain ``start script --enable-metrics --decode-log-interval 1`` with ``--no-spec``) serving
the script model, this writes into OUT_DIR:

- ``server_info_*.json``, ``metrics_*.txt``: ``/server_info`` and ``/metrics`` before the
  requests, after each phase, after ``/flush_cache`` while busy and while idle;
- ``generate.jsonl``: every ``/generate`` exchange (phase, category, key, request, status,
  body with its ``meta_info``, client start/finish in seconds since the first request);
- ``flush_*.json``: the ``/flush_cache`` answers; ``decode_log.txt``: the server log written
  meanwhile (its ``Decode batch`` lines carry ``accept len:``).

The prompts come from the script model's successor table (``script.json``): the next token
depends only on the current one, so a prompt's last token fixes its whole output. Its
permutation has cycles of 42, 242, 280 and 460 tokens (the last holds EOS): a prompt ending in
"\\n" gets the 9-token scripted answer; one ending inside a cycle without EOS follows the cycle
for max_new_tokens, and a long answer on the 42-cycle repeats itself (a degenerate output).
NGRAM drafts from tokens it has seen, so acceptance differs by category and grows as the
server sees the same text again.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

CHAT_PREFIX = [1, 936, 201]  # <|im_start|>user\n
CHAT_SUFFIX = [2, 201, 1, 300, 85, 927, 201]  # <|im_end|>\n<|im_start|>assistant\n


def call(url: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method="POST" if data else "GET")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def cycles(succ: list[int]) -> list[list[int]]:
    seen: set[int] = set()
    found = []
    for start in range(len(succ)):
        cycle = []
        token = start
        while token not in seen:
            seen.add(token)
            cycle.append(token)
            token = succ[token]
        if cycle:
            found.append(cycle)
    return sorted(found, key=len)


def plan(model: Path) -> list[tuple[str, list[dict[str, Any]], bool]]:
    """(phase, requests, concurrent) in order."""
    succ = json.loads((model / "script.json").read_text())["succ"]
    short, medium, long_, _ = cycles(succ)

    def chat(i: int) -> dict[str, Any]:
        ids = [*CHAT_PREFIX, 300 + i, 400 + i, *CHAT_SUFFIX]
        return {"category": "chat", "key": f"chat-{i}", "input_ids": ids, "max_new_tokens": 32}

    def on_cycle(name: str, cycle: list[int], at: int, n: int) -> dict[str, Any]:
        ids = [*CHAT_PREFIX, 500 + at % 400, cycle[at % len(cycle)]]
        return {"category": name, "key": f"{name}-{at}", "input_ids": ids, "max_new_tokens": n}

    return [
        ("chat", [chat(i) for i in range(6)], False),
        ("cycle42", [on_cycle("cycle42", short, at, 64) for at in (0, 10, 20, 30)], False),
        ("cycle242", [on_cycle("cycle242", medium, at, 64) for at in (0, 40, 80, 120)], False),
        ("cycle280", [on_cycle("cycle280", long_, at, 48) for at in (0, 7, 14, 21)], True),
        ("repeat", [on_cycle("repeat", short, 5, 480)], False),
    ]


class Recorder:
    def __init__(self, url: str, out: Path) -> None:
        self.url, self.out = url.rstrip("/"), out
        self.t0: float | None = None
        self.lock = threading.Lock()
        self.exchanges: list[dict[str, Any]] = []

    def snapshot(self, name: str) -> None:
        status, body = call(self.url, "/server_info")
        info = json.loads(body) if status == 200 else {"status": status}
        (self.out / f"server_info_{name}.json").write_text(json.dumps(info, indent=1) + "\n")
        status, body = call(self.url, "/metrics")
        (self.out / f"metrics_{name}.txt").write_bytes(body if status == 200 else b"")

    def generate(self, phase: str, spec: dict[str, Any]) -> None:
        request = {
            "input_ids": spec["input_ids"],
            "sampling_params": {"max_new_tokens": spec["max_new_tokens"], "temperature": 0.0},
        }
        started = time.monotonic()
        if self.t0 is None:
            self.t0 = started
        status, body = call(self.url, "/generate", request)
        finished = time.monotonic()
        with self.lock:
            self.exchanges.append({
                "phase": phase, "category": spec["category"], "key": spec["key"],
                "request": request, "status": status, "body": json.loads(body),
                "started_s": round(started - self.t0, 6),
                "finished_s": round(finished - self.t0, 6),
            })

    def run_phase(self, phase: str, requests: list[dict[str, Any]], concurrent: bool) -> None:
        if not concurrent:
            for spec in requests:
                self.generate(phase, spec)
            return
        threads = [threading.Thread(target=self.generate, args=(phase, s)) for s in requests]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def flush(self, name: str) -> None:
        status, body = call(self.url, "/flush_cache", {})
        (self.out / f"flush_{name}.json").write_text(
            json.dumps({"status": status, "body": body.decode()}, indent=1) + "\n")

    def flush_while_busy(self, model: Path) -> None:
        """/flush_cache during a request: SGLang refuses and keeps the lifetime figure."""
        long_request = plan(model)[-1][1][0] | {"key": "busy-flush", "max_new_tokens": 480}
        worker = threading.Thread(target=self.generate, args=("busy_flush", long_request))
        worker.start()
        time.sleep(0.5)  # the request is running (it takes seconds on this CPU)
        self.flush("busy")
        worker.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("out", type=Path)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--no-spec", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    _, body = call(args.url, "/model_info")
    model = args.model or Path(json.loads(body)["model_path"])
    log_start = args.log.stat().st_size
    recorder = Recorder(args.url, args.out)
    recorder.snapshot("before")
    phases = plan(model)
    if args.no_spec:
        phases = phases[:2]
    for phase, requests, concurrent in phases:
        recorder.run_phase(phase, requests, concurrent)
        recorder.snapshot(f"after_{phase}")
    if not args.no_spec:
        recorder.flush_while_busy(model)
        recorder.snapshot("after_busy_flush")
    recorder.flush("idle")
    recorder.snapshot("after_idle_flush")
    with open(args.out / "generate.jsonl", "w") as handle:
        for exchange in recorder.exchanges:
            handle.write(json.dumps(exchange) + "\n")
    with open(args.log, "rb") as log:
        log.seek(log_start)
        (args.out / "decode_log.txt").write_bytes(log.read())
    print(f"recorded {len(recorder.exchanges)} requests into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

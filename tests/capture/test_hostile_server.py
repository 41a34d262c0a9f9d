"""Hostile servers (issue 12): the real ``capture`` process against a real hostile server
process (``tests/support/hostile_server.py``) keeps a bounded RSS and fails each row with a
clear reason; a slightly long answer is stored and flagged; the streaming client is bounded
the same way.

RSS is sampled with psutil every 20 ms while the capture runs. Before the limits, 3 requests
in flight reached 3 GiB within 22 s on the oversized body, 33 s on the gzip bomb, 20 s on
the endless stream; now the whole process stays near its idle size (about 120 MiB here).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil
import pytest
from test_e2e_support import cli_env

from eagle_tui.core.shards.reader import ShardReader
from eagle_tui.core.tokenizer import bundled_tokenizer_path

pytestmark = pytest.mark.slow

SERVER = Path(__file__).resolve().parents[1] / "support" / "hostile_server.py"
RSS_LIMIT = 400 << 20  # the idle capture process is ~120 MiB; before the fix: > 3 GiB
MAX_NEW_TOKENS = 64


@contextmanager
def hostile(mode: str) -> Iterator[str]:
    """A hostile server process in ``mode``; its base URL."""
    server = subprocess.Popen([sys.executable, str(SERVER), mode], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        ready = server.stdout.readline().split()
        assert ready and ready[0] == "READY", ready
        yield f"http://127.0.0.1:{ready[1]}"
    finally:
        assert server.stdin is not None
        server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if server.stdout is not None:
            server.stdout.close()


def run_measured(args: list[str], timeout: float = 120.0) -> tuple[int, str, int]:
    """Run a command, sampling its RSS; (exit code, stderr, peak RSS in bytes)."""
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, env=cli_env(None))
    peak = 0
    probe = psutil.Process(process.pid)
    deadline = time.monotonic() + timeout
    while process.poll() is None:
        with suppress(psutil.Error):
            peak = max(peak, probe.memory_info().rss)
        if time.monotonic() > deadline:
            process.kill()
        time.sleep(0.02)
    assert process.stderr is not None
    err = process.stderr.read()
    process.stderr.close()
    return process.wait(), err, peak


def capture_against(url: str, tmp_path: Path, prompts: int = 6) -> tuple[int, str, int, Path]:
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"id": f"h{i}", "messages": [
        {"role": "user", "content": f"question {i}"}]}) + "\n" for i in range(prompts)))
    out = tmp_path / "out"
    code, err, peak = run_measured([
        sys.executable, "-m", "eagle_tui.tui.cli", "capture", "--display", "plain",
        "--prompts", str(path), "--out", str(out), "--server", url,
        "--tokenizer", str(bundled_tokenizer_path()), "--max-new-tokens", str(MAX_NEW_TOKENS),
        "--concurrency", "3", "--retries", "2"])
    return code, err, peak, out


@pytest.mark.parametrize(("mode", "reason"), [
    ("oversized", "response body over the 1.0 MiB limit"),
    ("announced", "announced a 4768.4 MiB body"),
    ("gzip_bomb", "response body over the 1.0 MiB limit"),
    ("endless_sse", "response body over the 1.0 MiB limit"),
    ("endless_line", "response body over the 1.0 MiB limit"),
    ("huge_ids", "body, over the 1.0 MiB limit"),
    ("nested", "JSON nested too deeply"),
    ("nested_top", "does not fit SGLang's /generate answer"),  # refused before any depth
])
def test_hostile_answers_fail_rows_clearly_with_bounded_memory(
        tmp_path: Path, mode: str, reason: str) -> None:
    with hostile(mode) as url:
        code, err, peak, out = capture_against(url, tmp_path)
    assert code == 1, err[-2000:]  # the batch finished; its rows failed
    assert "Traceback" not in err and "capture finished" in err
    assert peak < RSS_LIMIT, f"peak RSS {peak >> 20} MiB"
    failures = [json.loads(x) for x in (out / "failures.jsonl").read_text().splitlines()]
    assert sorted(f["sample_id"] for f in failures) == [f"h{i}" for i in range(6)]
    assert all(f["kind"] == "bad_response" and reason in f["reason"] for f in failures), \
        [f["reason"] for f in failures]
    assert "failed permanently    6  (bad_response 6)" in err


def test_a_little_more_output_than_asked_is_stored_and_flagged(tmp_path: Path) -> None:
    with hostile("long_ok") as url:
        code, err, _peak, out = capture_against(url, tmp_path, prompts=3)
    assert code == 0, err[-2000:]
    rows = list(ShardReader(out).iter_rows())
    assert len(rows) == 3
    for row in rows:
        assert len(row["input_ids"]) - row["prompt_len"] == MAX_NEW_TOKENS + 6
        assert "over_max_new_tokens" in row["flags"]


STREAM_DRIVER = """
import asyncio, sys
from eagle_tui.core.errors import SGLangError
from eagle_tui.core.sglang import GenerateRequest, SamplingParams, SGLangClient
from eagle_tui.core.urls import ServerURL

async def main() -> None:
    async with SGLangClient(ServerURL.parse(sys.argv[1])) as client:
        request = GenerateRequest([1, 2, 3], SamplingParams(max_new_tokens=64), rid="r")
        try:
            await client.generate_streaming(request, timeout=60)
        except SGLangError as e:
            print(type(e).__name__, e, file=sys.stderr)
            return
    print("no error", file=sys.stderr)

asyncio.run(main())
"""


@pytest.mark.parametrize(("mode", "reason"), [
    ("endless_sse", "output ids for max_new_tokens=64"),
    ("endless_line", "stream line over the 1.0 MiB limit"),
    ("oversized", "stream line over the 1.0 MiB limit"),
    ("gzip_bomb", "stream line over the 1.0 MiB limit"),
    ("announced", "stream line over the 1.0 MiB limit"),
])
def test_streaming_client_is_bounded_too(mode: str, reason: str) -> None:
    with hostile(mode) as url:
        code, err, peak = run_measured([sys.executable, "-c", STREAM_DRIVER, url])
    assert code == 0 and "ResponseTooLarge" in err and reason in err, err[-2000:]
    assert peak < RSS_LIMIT, f"peak RSS {peak >> 20} MiB"

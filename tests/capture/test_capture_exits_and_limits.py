"""Smaller checks of issue 12: server URLs, exit codes, the over_max_new_tokens flag,
response limits in the client, and error texts that name flags which exist."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_engine_fakes import FakeSGLang, bundled_tokenizer, capture, make_config, write_prompts

from eagle_tui.core import kimi
from eagle_tui.core.capture.engine import CaptureEngine
from eagle_tui.core.capture.retry import classify
from eagle_tui.core.errors import ResponseTooLarge, Unauthorized
from eagle_tui.core.sglang import GenerateRequest, SamplingParams, SGLangClient
from eagle_tui.core.sglang.limits import generate_body_limit, max_output_ids, read_limited
from eagle_tui.core.sglang.wire import error_for_status
from eagle_tui.core.tokenizer import BoundaryIds, bundled_tokenizer_path
from eagle_tui.core.urls import ServerURL, url_error
from eagle_tui.core.validate import NOT_EXPORTED_BY_DEFAULT, validate_sample
from eagle_tui.tui.cli.main import main

# -- URLs --------------------------------------------------------------------------------


@pytest.mark.parametrize(("url", "part"), [
    ("http://h:30000/?x=1", "query string"),
    ("http://h:30000/?api_key=sk-secret", "query string"),
    ("http://h:30000#frag", "fragment"),
    ("http://h :30000", "spaces or control"),
    ("http://h:30000\x1b]0;x\x07", "spaces or control"),
    ("http://h:99999", "not a valid URL"),
    ("ftp://h", "not an http(s) URL"),
    ("http://", "names no host"),
])
def test_unusable_server_urls_are_refused(url: str, part: str) -> None:
    problem = url_error(url)
    assert problem is not None and part in problem and problem.startswith("--server ")
    assert "sk-secret" not in problem and "x=1" not in problem  # never echo the query


def test_user_info_is_refused_only_together_with_a_key() -> None:
    assert url_error("http://u:pw@h:30000") is None
    problem = url_error("http://u:pw@h:30000", has_key=True)
    assert problem is not None and "Basic auth" in problem and "pw" not in problem
    assert url_error("http://h:30000/prefix/", has_key=True) is None  # a proxy path is fine


def test_capture_refuses_a_query_url_before_sending(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    write_prompts(tmp_path / "p.jsonl", 2)
    with pytest.raises(SystemExit) as exited:  # argparse refuses it: the URL is an option type
        main(["capture", "--prompts", str(tmp_path / "p.jsonl"), "--out",
              str(tmp_path / "out"), "--server", "http://127.0.0.1:9/?x=1",
              "--tokenizer", str(bundled_tokenizer_path())])
    assert exited.value.code == 2 and "--server: 'http://127.0.0.1:9/': has a query string" in (
        capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


def test_error_texts_name_flags_that_exist(capsys: pytest.CaptureFixture[str]) -> None:
    """The 401 text named a --api-key flag that capture does not have."""
    message = str(error_for_status(401, b'{"error": "Unauthorized"}', url="http://h/generate"))
    assert isinstance(error_for_status(401, b"", url="u"), Unauthorized)
    with pytest.raises(SystemExit):
        main(["capture", "--help"])
    capture_flags = set(re.findall(r"--[a-z][a-z-]+", capsys.readouterr().out))
    for flag in re.findall(r"--[a-z][a-z-]+", message):
        assert flag in capture_flags, flag
    assert "EAGLE_TUI_API_KEY" in message


# -- exit codes --------------------------------------------------------------------------


def test_a_crash_exits_3_with_one_line_and_the_traceback_in_the_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(self: CaptureEngine) -> Any:
        raise RuntimeError("a bug\x1b]0;x\x07")

    monkeypatch.setattr(CaptureEngine, "run", broken)
    write_prompts(tmp_path / "p.jsonl", 2)
    code = main(["capture", "--prompts", str(tmp_path / "p.jsonl"), "--out",
                 str(tmp_path / "out"), "--server", "http://127.0.0.1:9",
                 "--tokenizer", str(bundled_tokenizer_path())])
    err = capsys.readouterr().err
    assert code == 3
    assert "batch crashed (RuntimeError: a bug␛]0;x" in err and "Traceback" not in err
    assert "\x1b" not in err and len(err.strip().splitlines()) == 1
    assert "Traceback" in (tmp_path / "out" / "capture.log").read_text()


def test_capture_help_documents_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["capture", "--help"])
    text = capsys.readouterr().out
    for line in ("1  rows failed", "2  refused to start", "3  batch crashed"):
        assert line in text


# -- over_max_new_tokens -------------------------------------------------------------------


BOUNDARY = BoundaryIds(kimi.THINK, kimi.THINK_END, (kimi.IM_END,), kimi.TOOL_CALL_IDS)


@pytest.mark.parametrize(("output", "flagged"), [
    ([5] * 64, False),
    ([5] * 63 + [kimi.IM_END], False),
    ([5] * 64 + [kimi.IM_END], False),  # the stop token on top of max_new_tokens
    ([5] * 65, True),
    ([5] * 65 + [kimi.IM_END], True),
])
def test_output_longer_than_asked_is_flagged(output: list[int], flagged: bool) -> None:
    result = validate_sample([1, kimi.THINK], output, finish_kind="length",
                             completion_tokens=len(output), prompt_tokens=2,
                             boundary=BOUNDARY, vocab_size=kimi.VOCAB_SIZE, max_new_tokens=64)
    assert ("over_max_new_tokens" in result.flags) is flagged
    assert "over_max_new_tokens" in NOT_EXPORTED_BY_DEFAULT
    unchecked = validate_sample([1, kimi.THINK], output, finish_kind="length",
                                completion_tokens=len(output), prompt_tokens=2,
                                boundary=BOUNDARY, vocab_size=kimi.VOCAB_SIZE)
    assert "over_max_new_tokens" not in unchecked.flags


# -- response limits ----------------------------------------------------------------------


def request(max_new_tokens: int = 64) -> GenerateRequest:
    return GenerateRequest([1, 2, 3], SamplingParams(max_new_tokens=max_new_tokens), rid="r")


def body(ids: list[int]) -> dict[str, Any]:
    return {"text": "", "output_ids": ids, "meta_info": {
        "id": "r", "finish_reason": {"type": "length", "length": 64},
        "completion_tokens": len(ids), "prompt_tokens": 3}}


async def test_the_client_asks_for_identity_and_refuses_too_many_ids() -> None:
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, json=body([7] * (max_output_ids(64) + 1)))

    async with SGLangClient(ServerURL.parse("http://h:1"),
                            transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(ResponseTooLarge, match="output ids for max_new_tokens=64") as info:
            await client.generate(request())
    assert seen[0].headers["accept-encoding"] == "identity"
    verdict = classify(info.value)
    assert verdict.kind == "bad_response" and not verdict.retry


def streamed(chunks: list[bytes], headers: dict[str, str]) -> httpx.Response:
    async def stream() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return httpx.Response(200, headers=headers, content=stream())


async def test_read_limited_bounds_the_inflated_size_of_gzip() -> None:
    bomb = gzip.compress(b"0" * (8 << 20))
    response = streamed([bomb[i:i + 4096] for i in range(0, len(bomb), 4096)],
                        {"content-encoding": "gzip"})
    with pytest.raises(ResponseTooLarge, match=r"over the 1\.0 MiB limit"):
        await read_limited(response, 1 << 20, url="u")
    small = streamed([gzip.compress(b'{"a": 1}')], {"content-encoding": "gzip"})
    assert await read_limited(small, 1 << 20, url="u") == b'{"a": 1}'
    announced = streamed([b"x"], {"content-length": str(10 << 20)})
    with pytest.raises(ResponseTooLarge, match=r"announced a 10\.0 MiB body"):
        await read_limited(announced, 1 << 20, url="u")
    odd = streamed([b"x"], {"content-encoding": "br"})
    with pytest.raises(ResponseTooLarge, match="encoded as 'br'"):
        await read_limited(odd, 1 << 20, url="u")
    error_body = streamed([b"e" * 5000], {})
    assert await read_limited(error_body, 100, url="u", truncate=True) == b"e" * 100
    assert generate_body_limit(4096) == (1 << 20) + 512 * 4096


async def test_nested_json_answer_is_a_bad_response_not_an_internal_error(
        tmp_path: Path) -> None:
    fake = FakeSGLang()

    async def nested(body: dict[str, Any]) -> httpx.Response:
        deep = b"[" * 100_000 + b"]" * 100_000
        return httpx.Response(200, content=b'{"output_ids": [1], "meta_info": {"deep": '
                              + deep + b"}}")

    fake._generate = nested  # type: ignore[method-assign]
    write_prompts(tmp_path / "prompts.jsonl", 3)
    summary = await capture(make_config(tmp_path, [fake.url]), [fake], bundled_tokenizer())
    assert summary.state == "finished" and summary.progress.counts.failed == 3
    failures = [json.loads(x) for x in (tmp_path / "out" / "failures.jsonl").read_text()
                .splitlines()]
    assert {f["kind"] for f in failures} == {"bad_response"}
    assert all("nested too deeply" in f["reason"] for f in failures)

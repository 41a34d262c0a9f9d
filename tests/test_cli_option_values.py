"""Issue 24 items 6, 7, 10 and 11 (and issue 20 item 18), step by step as reproduced: each
value is refused while parsing, in one line naming the option, exit status 2, before anything
is created; the small files behind options (API key file, prompt file, a followed log) are
read bounded and never waited on when they are FIFOs or devices.

The fuzz test (``test_cli_option_fuzz.py``) covers every option with generic hostile values;
this file keeps the issue's exact reproductions and the library paths under the options.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eagle_tui.core.capture.config import MAX_CONCURRENCY
from eagle_tui.core.capture.prompts import open_prompts, prompt_file_hash
from eagle_tui.core.errors import ConfigError, UnfitFile
from eagle_tui.core.fsio import read_small
from eagle_tui.core.serverlog.follower import LogFollower
from eagle_tui.core.sglang.apikey import read_api_key
from eagle_tui.core.tokenizer import bundled_tokenizer_path
from eagle_tui.core.tokenizer.modelconfig import read_model_config
from eagle_tui.tui.cli.main import main

TOKENIZER = str(bundled_tokenizer_path())


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty current directory; a prompt file and a FIFO beside it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EAGLE_TUI_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "p.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    os.mkfifo(tmp_path / "fifo")
    return tmp_path


def capture_argv(*extra: str) -> list[str]:
    return ["capture", "--prompts", "p.jsonl", "--out", "out", "--server",
            "http://127.0.0.1:9", "--tokenizer", TOKENIZER, *extra]


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one stderr line of a parse-time refusal (exit 2)."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def entries(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


# -- item 6: small files, bounded; FIFOs and devices refused without blocking ---------------


@pytest.mark.parametrize("value", ["/dev/zero", "fifo"])
@pytest.mark.parametrize("verb", ["capture", "resume"])
def test_api_key_file_that_is_a_device_or_fifo_is_refused(
        work: Path, verb: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = (capture_argv("--api-key-file", value) if verb == "capture"
            else ["resume", "b", "--api-key-file", value])
    err = refused(argv, capsys)
    assert "--api-key-file" in err and "not a regular file" in err


def test_the_api_key_reader_is_bounded_and_never_blocks(work: Path) -> None:
    with pytest.raises(ConfigError, match="character device"):
        read_api_key(Path("/dev/zero"))
    with pytest.raises(ConfigError, match="FIFO"):
        read_api_key(work / "fifo")  # no writer: a plain open() would wait for ever
    big = work / "big-key"
    with open(big, "wb") as handle:
        handle.truncate(1 << 20)
    with pytest.raises(ConfigError, match="larger than 64 KiB"):
        read_api_key(big)
    (work / "key").write_text("sk-1\n")
    assert read_api_key(work / "key") == "sk-1"


@pytest.mark.parametrize("verb", ["status", "watch"])
def test_a_fifo_as_the_log_is_refused(work: Path, verb: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    argv = [verb, "--url", "http://127.0.0.1:9", "--log", "fifo"]
    err = refused([*argv, "--once"] if verb == "status" else argv, capsys)
    assert "--log" in err and "FIFO" in err


def test_a_log_that_becomes_a_fifo_is_reported_not_waited_on(work: Path) -> None:
    follower = LogFollower(work / "fifo")  # the path was a FIFO before the follower came
    chunk = follower.read()
    assert chunk.error is not None and "FIFO" in chunk.error and chunk.lines == ()
    follower.close()


def test_a_fifo_as_the_prompt_file_is_refused(work: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(["capture", "--prompts", "fifo", "--out", "out", "--server",
                   "http://127.0.0.1:9", "--tokenizer", TOKENIZER], capsys)
    assert "--prompts" in err and "FIFO" in err
    with pytest.raises(ConfigError, match="FIFO"):
        open_prompts(work / "fifo")
    with pytest.raises(ConfigError, match="FIFO"):
        prompt_file_hash(work / "fifo")
    assert not (work / "out").exists()


def test_read_small_refuses_every_kind_of_non_file(work: Path) -> None:
    for path, kind in [(work / "fifo", "FIFO"), (Path("/dev/zero"), "character device"),
                       (work, "directory")]:
        with pytest.raises(UnfitFile, match=kind):
            read_small(path, 1024, "thing")
    (work / "small").write_bytes(b"x" * 1024)
    assert read_small(work / "small", 1024, "thing") == b"x" * 1024
    with pytest.raises(UnfitFile, match="larger than 1023 bytes"):
        read_small(work / "small", 1023, "thing")


def test_a_model_config_that_is_a_device_is_refused(work: Path) -> None:
    model = work / "model"
    model.mkdir()
    (model / "config.json").symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match="character device"):
        read_model_config(model)


# -- items 7, 10, 11: values refused while parsing ---------------------------------------------

# (argv, the option the line must name), each a reproduction step of the issue.
REPRODUCTIONS: list[tuple[list[str], str]] = [
    # item 7
    (["watch", "--url", "http://127.0.0.1:9", "--health-timeout", "nan"], "--health-timeout"),
    (["watch", "--url", "http://127.0.0.1:9", "--expected", "1e400"], "--expected"),
    (["watch", "--url", "http://127.0.0.1:9", "--expected", "nan"], "--expected"),
    (capture_argv("--concurrency", "100000000"), "--concurrency"),
    # item 10 (and issue 20 item 18: --shard 5/4, --shard auto)
    *[(capture_argv("--shard", value), "--shard")
      for value in ("0/0", "1/1", "a/b", "1", "", "0/2/3", "auto", "5/4")],
    (capture_argv("--sampling-param", "k=" + "[" * 5000 + "]" * 5000), "--sampling-param"),
    (["watch", "--url", "http://127.0.0.1:99999"], "--url"),
    (["watch", "--url", "http://[::1"], "--url"),
    (["status", "--router-metrics", "http://[::1"], "--router-metrics"),
    (["sim", "--log-file", "."], "--log-file"),
    (["sim", "--log-file", "missing-dir/sim.log"], "--log-file"),
    (["sim", "--port", "-1"], "--port"),
    (["sim", "--port", "99999999999"], "--port"),
    # item 11
    (capture_argv("--out", ""), "--out"),
    (capture_argv("--model-dir", "missing"), "--model-dir"),
    (capture_argv("--model-dir", "fifo"), "--model-dir"),
    (capture_argv("--model-dir", "/dev/zero"), "--model-dir"),
    (capture_argv("--sampling-param", "k="), "--sampling-param"),
    (capture_argv("--sampling-param", "k={bad"), "--sampling-param"),
    (capture_argv("--grace", "nan"), "--grace"),
    (capture_argv("--timeout", "1e400"), "--timeout"),
    (["watch", "--url", "http://127.0.0.1:9", "--interval", "0"], "--interval"),
    (["watch", "--url", "http://127.0.0.1:9", "--stall", "-1"], "--stall"),
    (["stats", ".", "--max-length", "-1"], "--max-length"),
    (["demo", "--time-scale", "-1"], "--time-scale"),
    (["sim", "--host", ""], "--host"),
]


@pytest.mark.parametrize(("argv", "option"), REPRODUCTIONS,
                         ids=[" ".join(a)[:60] for a, _ in REPRODUCTIONS])
def test_each_reproduced_value_is_a_one_line_usage_error(
        work: Path, argv: list[str], option: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = entries(work)
    err = refused(argv, capsys)
    assert f"argument {option}:" in err
    assert entries(work) == before  # `--out ''` made the current directory a batch


def test_sampling_values_that_are_plain_text_or_json_still_pass(work: Path) -> None:
    from eagle_tui.tui.cli.capture import key_json

    assert key_json("repetition_penalty=1.05") == ("repetition_penalty", 1.05)
    assert key_json("stop=</s>") == ("stop", "</s>")
    assert key_json('stop=["a", "b"]') == ("stop", ["a", "b"])
    assert key_json("thinking=false") == ("thinking", False)


def test_the_capture_config_refuses_what_the_parser_refuses(tmp_path: Path) -> None:
    """The detached worker builds its config from stored JSON, not from the parser."""
    from eagle_tui.core.capture.config import CaptureConfig
    from eagle_tui.core.urls import ServerURL

    base = {"prompts": tmp_path / "p", "out_dir": tmp_path / "o",
            "servers": (ServerURL.parse("http://a:1"),),
            "tokenizer": tmp_path}
    with pytest.raises(ConfigError, match="above 4096"):
        CaptureConfig(**base, concurrency=MAX_CONCURRENCY + 1)  # type: ignore[arg-type]
    for field in ("request_timeout_s", "health_interval_s", "server_down_limit_s"):
        with pytest.raises(ConfigError, match="finite"):
            CaptureConfig(**base, **{field: float("inf")})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="finite"):
        CaptureConfig(**base, stop_grace_s=float("nan"))  # type: ignore[arg-type]

"""The ``capture`` verb's flags, config building, exit status for bad input, and the text
it prints (progress lines, summary)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from support.progress import snapshot as progress_snapshot
from test_engine_fakes import FakeSGLang, bundled_tokenizer, capture, make_config, write_prompts

from eagle_tui.core.capture.dispatch import ServerStatus
from eagle_tui.core.capture.progress import CaptureProgress
from eagle_tui.core.capture.report import progress_line, summary_text
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.text import duration
from eagle_tui.core.tokenizer import bundled_tokenizer_path
from eagle_tui.tui.cli import capture as cli
from eagle_tui.tui.cli.main import main


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(list(argv))


BASE = ("--prompts", "p.jsonl", "--out", "out", "--server", "http://a:1",
        "--tokenizer", str(bundled_tokenizer_path()))


@pytest.fixture(autouse=True)
def _in_a_directory_with_prompts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """BASE names ``p.jsonl``: the parser checks that the prompt file is one."""
    monkeypatch.chdir(tmp_path)
    write_prompts(tmp_path / "p.jsonl", 1)


def test_flags_become_a_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("sk-from-file\n")
    args = parse(*BASE, "--server", "http://b:2", "--temperature", "0.6", "--temperature", "1",
                 "--top-p", "0.95", "--seed", "3", "--max-new-tokens", "2048",
                 "--sampling-param", "repetition_penalty=1.05",
                 "--template-kwarg", "thinking=false", "--boundary", "think=163606",
                 "--concurrency", "128", "--retries", "4", "--resume", "--api-key-file",
                 str(key_file))
    config = cli.config_from_args(args)
    assert [url.public for url in config.servers] == ["http://a:1", "http://b:2"]
    assert [p.name for p in config.presets] == ["t0.6", "t1"]
    assert {p.top_p for p in config.presets} == {0.95} and config.presets[0].seed == 3
    assert config.extra_sampling == {"repetition_penalty": 1.05}
    assert config.template_kwargs == {"thinking": False}
    assert config.boundary_overrides == {"think": 163606}
    assert config.total_concurrency == 256 and config.retry.max_attempts == 4
    assert config.resume and config.api_key == "sk-from-file"
    monkeypatch.setenv("EAGLE_TUI_API_KEY", "sk-env")
    assert cli.config_from_args(parse(*BASE)).api_key == "sk-env"
    single = cli.config_from_args(parse(*BASE))
    assert [p.name for p in single.presets] == [""] and single.presets[0].temperature == 1.0


def test_bad_flags_are_refused() -> None:
    with pytest.raises(ConfigError, match="repeat"):
        cli.config_from_args(parse(*BASE, "--temperature", "0.5", "--temperature", "0.5"))


@pytest.mark.parametrize(
    ("extra", "message"),
    [(("--sampling-param", "oops"), "--sampling-param: 'oops' is not KEY=VALUE"),
     (("--concurrency", "0"), "--concurrency: '0' is out of range")],
)
def test_bad_flag_values_are_refused_by_the_parser(
        extra: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(*BASE, *extra)
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_a_bad_server_url_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(*BASE, "--server", "localhost:30000")
    assert exited.value.code == 2 and "--server: 'localhost:30000': is not an http" in (
        capsys.readouterr().err)


def test_a_batch_that_cannot_start_exits_2(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["capture", "--prompts", str(tmp_path / "missing.jsonl"), "--out",
              str(tmp_path / "out"), "--server", "http://127.0.0.1:9",
              "--tokenizer", str(bundled_tokenizer_path())])
    assert exited.value.code == 2 and not (tmp_path / "out").exists()
    assert "--prompts: " in (err := capsys.readouterr().err)
    assert "missing.jsonl' does not exist" in err


def snapshot(**overrides: object) -> CaptureProgress:
    values: dict[str, object] = dict(
        state="running", total=1000, already_done=100, done=400, written=300, failed=3,
        flagged=20, rejected=2, retrying=1, interrupted=0, in_flight=64, output_tokens=123456,
        elapsed_s=75.0, samples_per_s=12.5, tokens_per_s=4000.0, eta_s=395.0,
        servers=(ServerStatus("http://a:1", "ready", "", 32, 32, 500, 480, 5),),
        errors={"busy": 4, "timeout": 1})
    values.update(overrides)
    return progress_snapshot(**values)


def test_progress_line_has_the_numbers_an_operator_needs() -> None:
    line = progress_line(snapshot())
    for part in ("505/1,000 rows", "400 done (300 saved)", "3 failed", "20 flagged",
                 "2 rejected", "64 in flight", "12.5 samples/s", "4,000 tok/s", "ETA 6m35s",
                 "busy 4, timeout 1", "http://a:1=ready:32"):
        assert part in line
    assert duration(None) == "?" and duration(3725) == "1h02m" and duration(9) == "9s"


async def test_summary_names_files_and_what_is_left(tmp_path: Path) -> None:
    fake = FakeSGLang()
    fake.faults.append("ctx")
    write_prompts(tmp_path / "prompts.jsonl", 5, bad_every=5)
    config = make_config(tmp_path, [fake.url], concurrency=1)
    summary = await capture(config, [fake], bundled_tokenizer())
    text = summary_text(summary)
    assert "capture finished" in text
    assert "failed permanently    1  (context_too_long 1)" in text
    assert "prompts rejected      1" in text
    # Issue 12: a prompt too long for the context is not resent by a plain --resume.
    assert "left for a resume     0" in text
    assert "1 too long for the context only with --retry-failed" in text
    assert str(config.out_dir / "failures.jsonl") in text


def test_help_and_readme_list_the_interrupted_exit_status(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 20 item 5: `capture … && export …` must not export a batch cut short."""
    with pytest.raises(SystemExit):
        main(["capture", "--help"])
    assert "130  interrupted by Ctrl-C before every row was captured" in capsys.readouterr().out
    verbs = (Path(__file__).parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    assert "130 interrupted by Ctrl-C" in " ".join(verbs.split())

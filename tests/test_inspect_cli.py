"""`eagle-tui inspect` and `eagle-tui stats` on a batch captured with the bundled tokenizer."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from rich.console import Console

from eagle_tui.core import kimi
from eagle_tui.core.sampling import SamplingIdentity, SamplingPreset
from eagle_tui.core.shards.manifest import BatchConfig, Manifest
from eagle_tui.core.shards.schema import FooterTokenizer, ShardMetadata, ShardRow
from eagle_tui.core.shards.writer import ShardWriter
from eagle_tui.core.tokenizer import LoadedTokenizer, bundled_tokenizer_path, load_tokenizer
from eagle_tui.core.validate import validate_sample
from eagle_tui.tui.cli.inspect import run as run_inspect
from eagle_tui.tui.cli.main import build_parser, main

ANSI = re.compile(r"\x1b\[[0-9;]*m")
USER_TEXT = "Add 2 and 2 [bold]please[/bold] \x1b[2J"


@pytest.fixture(scope="module")
def tokenizer() -> LoadedTokenizer:
    return load_tokenizer(bundled_tokenizer_path())


def encode(tokenizer: LoadedTokenizer, text: str) -> list[int]:
    return list(tokenizer.hf.encode(text, add_special_tokens=False))


def outputs(tok: LoadedTokenizer) -> list[tuple[list[int], str]]:
    """(output ids, finish) for: a tool call, a clean answer, a truncated reasoning."""
    tool = [*encode(tok, "Use the tool."), kimi.THINK_END, *encode(tok, "Sure."),
            kimi.TOOL_CALLS_SECTION_BEGIN, kimi.TOOL_CALL_BEGIN, *encode(tok, "functions.add:0"),
            kimi.TOOL_CALL_ARGUMENT_BEGIN, *encode(tok, '{"a":2}'), kimi.TOOL_CALL_END,
            kimi.TOOL_CALLS_SECTION_END, kimi.IM_END]
    clean = [*encode(tok, "Easy."), kimi.THINK_END, *encode(tok, "4"), kimi.IM_END]
    truncated = encode(tok, "Hmm, let me think about this for a long")
    return [(tool, "stop"), (clean, "stop"), (truncated, "length")]


@pytest.fixture(scope="module")
def batch(tokenizer: LoadedTokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("inspect") / "batch"
    boundary = tokenizer.boundary_ids()
    config = BatchConfig("p.jsonl", "00", str(tokenizer.path), tokenizer.fingerprint(),
                         tokenizer.template_hash(), SamplingIdentity(4096, (SamplingPreset(),)))
    manifest = Manifest(directory, config)
    meta = ShardMetadata(
        tokenizer=FooterTokenizer(name=tokenizer.name, path=str(tokenizer.path),
                                  fingerprint=tokenizer.fingerprint(), vocab_size=163840),
        template_hash=tokenizer.template_hash(), boundary_ids=boundary.as_dict())
    prompt = tokenizer.render([{"role": "user", "content": USER_TEXT}])
    with ShardWriter(directory, metadata=meta, manifest=manifest) as writer:
        for i, (out, finish) in enumerate(outputs(tokenizer)):
            check = validate_sample(prompt, out, finish_kind=finish,
                                    completion_tokens=len(out), prompt_tokens=len(prompt),
                                    boundary=boundary, vocab_size=tokenizer.vocab_bound())
            writer.add(ShardRow(f"id-{i}", prompt + out, len(prompt), finish,
                                kimi.IM_END if finish == "stop" else None, check.think_end,
                                check.flags, "http://sim", f"r{i}", 1.0 + i,
                                datetime(2026, 1, 1, tzinfo=UTC)))
    return directory


def inspect_plain(
    batch: Path, argv: Sequence[str], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, str, str]:
    monkeypatch.setenv("NO_COLOR", "1")
    status = main(["inspect", str(batch), *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_inspect_marks_every_boundary_in_plain_text(
    batch: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = inspect_plain(batch, ["--index", "0"], monkeypatch, capsys)
    assert status == 0
    assert not ANSI.search(out)
    assert "sample id-0" in out and "flags: tool_call" in out
    for piece in ["«prompt»<|im_system|>system", "<|im_middle|>⟦<think> 163606⟧",
                  "«reasoning»Use the tool.⟦</think> 163607⟧«answer»Sure.",
                  "⟦<|tool_calls_section_begin|> 163595⟧⟦<|tool_call_begin|> 163597⟧",
                  "«tool_args»functions.add:0⟦<|tool_call_argument_begin|> 163598⟧",
                  "⟦<|tool_calls_section_end|> 163596⟧⟦<|im_end|> 163586⟧"]:
        assert piece in out, piece


def test_model_text_is_literal_never_markup_or_terminal_control(
    batch: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = inspect_plain(batch, [], monkeypatch, capsys)
    assert "[bold]please[/bold] \\x1b[2J" in out
    assert "\x1b" not in out


def test_inspect_colours_each_kind_when_the_terminal_allows(
    batch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, color_system="standard", width=300,
                      markup=False, highlight=False)
    args = build_parser(["inspect"]).parse_args(["inspect", str(batch)])
    assert run_inspect(args, console) == 0
    out = buffer.getvalue()
    assert len(set(ANSI.findall(out))) >= 5  # several distinct styles
    assert "⟦</think> 163607⟧" in ANSI.sub("", out)


def test_select_by_id_flag_and_negative_index(
    batch: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = inspect_plain(batch, ["--id", "id-1"], monkeypatch, capsys)
    assert "sample id-1" in out and "flags: none (clean)" in out
    _, out, _ = inspect_plain(batch, ["--flag", "truncated"], monkeypatch, capsys)
    assert "sample id-2" in out and "no_think_end, truncated" in out
    assert "finish length" in out and "think_end at none" in out
    _, out, _ = inspect_plain(batch, ["--index", "-1"], monkeypatch, capsys)
    assert "sample id-2" in out


@pytest.mark.parametrize(
    ("argv", "status", "message"),
    [
        (["--id", "nope"], 1, "no sample with id 'nope'"),
        (["--flag", "aborted"], 1, "no sample has flag 'aborted'"),
        (["--flag", "made_up"], 1, "known flags: prompt_no_think"),
        (["--index", "3"], 2, "--index 3 is out of range"),
    ],
)
def test_nothing_selected_is_a_clear_error(
    batch: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    argv: list[str], status: int, message: str,
) -> None:
    got, out, err = inspect_plain(batch, argv, monkeypatch, capsys)
    assert got == status and message in err and out == ""


def test_raw_ids_need_no_tokenizer_and_missing_tokenizer_says_what_to_do(
    batch: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    missing = tmp_path / "gone"
    status, _, err = inspect_plain(batch, ["--tokenizer", str(missing)], monkeypatch, capsys)
    assert status == 2 and "--raw-ids" in err and str(missing) in err
    status, out, _ = inspect_plain(batch, ["--raw-ids"], monkeypatch, capsys)
    assert status == 0 and "⟦think_end 163607⟧«answer»" in out


def test_prompt_tokens_shows_only_the_prompt_tail(
    batch: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = inspect_plain(batch, ["--prompt-tokens", "1", "--raw-ids"], monkeypatch, capsys)
    assert "prompt tokens not shown»" in out
    assert "<|im_system|>" not in out and "⟦think_start 163606⟧" in out


def test_other_tokenizer_triggers_a_warning(
    batch: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    manifest = Manifest.load(batch)
    copy = tmp_path / "batch"
    meta = _meta(batch)
    meta = msgspec.structs.replace(
        meta, tokenizer=msgspec.structs.replace(meta.tokenizer, fingerprint="other"))
    writer_manifest = Manifest(copy, msgspec.structs.replace(manifest.config))
    with ShardWriter(copy, metadata=meta, manifest=writer_manifest) as writer:
        writer.add(ShardRow("x", [1, 2, kimi.IM_END], 2, "stop", kimi.IM_END, -1, [], "e", "r",
                            0.1, datetime(2026, 1, 1, tzinfo=UTC)))
    status, _, err = inspect_plain(copy, [], monkeypatch, capsys)
    assert status == 0 and "differs from the one the shards were captured with" in err


def _meta(batch: Path) -> ShardMetadata:
    from eagle_tui.core.shards.reader import ShardReader

    meta = ShardReader(batch).metadata
    assert meta is not None
    return meta


def test_stats_counts_flags_finish_reasons_and_lengths(
    batch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["stats", str(batch), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["rows"] == 3 and stats["clean"] == 1
    assert stats["flags"] == {"tool_call": 1, "no_think_end": 1, "truncated": 1}
    assert stats["finish_reasons"] == {"stop": 2, "length": 1}
    assert stats["reasoning_tokens"]["count"] == 2  # the truncated one never ended reasoning
    assert stats["latency_s"]["max"] == pytest.approx(3.0)
    assert stats["manifest_counts"]["done"] == 3


def test_stats_tables_read_without_colour(
    batch: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["stats", str(batch)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"truncated\s*│\s*1\s*│\s*33\.3", out)
    assert re.search(r"\(clean\)\s*│\s*1", out)
    assert "p99" in out and not ANSI.search(out)
    assert main(["stats", str(batch / "missing")]) == 2

"""The ``export`` verb and the ``stats`` verb's export preview, through ``main``."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import ModuleType

import pytest
from export_helpers import make_row, read_jsonl, write_batch
from rich.console import Console

from eagle_tui.tui.cli.main import build_parser, main
from eagle_tui.tui.cli.stats import run as run_stats


@pytest.fixture
def batch(tmp_path: Path) -> Path:
    return write_batch(tmp_path / "batch", [make_row(i) for i in range(50)])


def test_export_verb_writes_and_says_what_it_kept(
    batch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "train.jsonl"
    code = main(["export", str(batch), "--format", "specforge", "--out", str(out),
                 "--keep-flag", "aborted", "--finish", "stop,abort", "--max-length", "10"])
    printed = capsys.readouterr().out
    assert code == 0
    assert f"wrote {len(read_jsonl(out))} rows to {out}" in printed
    assert "loss_mask from prompt-1" in printed
    assert ("(dropped: finish=length 10, bad_token_id 5, count_mismatch 5, "
            "prompt_count_mismatch 5)") in printed
    assert "at max length 10:" in printed and "data.prompts_path" in printed
    manifest = json.loads((tmp_path / "train.jsonl.manifest.json").read_text())
    assert manifest["filter"]["finish"] == ["abort", "stop"]
    assert "aborted" not in manifest["filter"]["drop_flags"]


def test_export_verb_errors_exit_2_with_the_reason(
    batch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "train.jsonl"
    assert main(["export", str(tmp_path), "--format", "speculators", "--out", str(out)]) == 2
    assert "no manifest" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:  # refused by the parser, in one line
        main(["export", str(batch), "--format", "speculators", "--out", str(out),
              "--drop-flag", "nonsense"])
    assert exited.value.code == 2
    assert "--drop-flag: unknown flag(s) nonsense" in capsys.readouterr().err
    out.write_text("x")
    assert main(["export", str(batch), "--format", "specforge", "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["export", str(batch), "--format", "specforge", "--out", str(out),
                 "--force"]) == 0


def test_stats_previews_the_export_in_its_single_read(
    batch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    buffer = io.StringIO()
    args = ["stats", str(batch), "--max-length", "12"]
    code = run_stats(build_parser(args).parse_args(args),
                     Console(file=buffer, width=200, color_system=None))
    assert code == 0
    out = tmp_path / "t.jsonl"
    main(["export", str(batch), "--format", "speculators", "--out", str(out),
          "--max-length", "12"])
    kept_line = capsys.readouterr().out.splitlines()[2]
    assert kept_line.replace("kept", "export would keep", 1) in buffer.getvalue()
    assert main(["stats", str(batch), "--json", "--drop-flag", "tool_call"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["export"]["dropped"]["tool_call"] == 5
    assert document["export"]["kept"] + sum(document["export"]["dropped"].values()) == 50


@pytest.mark.parametrize("fmt", ["speculators", "parquet"])
def test_hugging_face_datasets_loads_the_export(batch: Path, tmp_path: Path, fmt: str,
                                                hf_datasets: ModuleType) -> None:
    out = tmp_path / ("train.jsonl" if fmt == "speculators" else "train.parquet")
    assert main(["export", str(batch), "--format", fmt, "--out", str(out)]) == 0
    loader = "json" if fmt == "speculators" else "parquet"
    loaded = hf_datasets.load_dataset(loader, data_files=str(out), split="train",
                                      cache_dir=str(tmp_path / "hf-cache"))
    rows = read_jsonl(out) if fmt == "speculators" else None
    assert loaded.num_rows == 30
    first = loaded[0]
    assert len(first["input_ids"]) == len(first["loss_mask"])
    if rows is not None:
        assert loaded["input_ids"] == [r["input_ids"] for r in rows]
        assert loaded[2]["metadata"]["flags"] == rows[2]["metadata"]["flags"]

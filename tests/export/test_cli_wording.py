"""Issue 20's wording defects, through the verbs as a user runs them: each line reads as a
sentence and says what is true (sizes of small files, why a batch cannot be stopped, a
file name that promises another format, batches in ``status``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from export_helpers import make_row, write_batch
from support.records import stored_config

from eagle_tui.core.batches.registry import BatchRecord, Registry
from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.capture.progress import Progress
from eagle_tui.core.text import byte_size
from eagle_tui.core.wire import printable_json
from eagle_tui.tui.cli.batch_table import NoProgress
from eagle_tui.tui.cli.main import main
from eagle_tui.tui.cli.status import BatchLine, StatusReport, render_text


@pytest.fixture
def batch(tmp_path: Path) -> Path:
    return write_batch(tmp_path / "batch", [make_row(i) for i in range(50)])


def test_a_small_export_gives_its_size_in_kib_not_0_0_mib(
        batch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "train.jsonl"
    assert main(["export", str(batch), "--format", "specforge", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "0.0 MiB" not in printed
    assert f"({byte_size(out.stat().st_size)}, specforge" in printed
    assert out.stat().st_size < 1 << 20 and " KiB, specforge" in printed
    assert (byte_size(0), byte_size(1023), byte_size(50_000), byte_size(3 << 20)) == (
        "0 B", "1023 B", "48.8 KiB", "3.0 MiB")


@pytest.mark.parametrize(("fmt", "name"), [("specforge", "y.parquet"),
                                           ("speculators", "y.PARQUET"),
                                           ("parquet", "y.jsonl")])
def test_an_out_name_that_promises_another_format_is_refused(
        batch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str,
        name: str) -> None:
    out = tmp_path / name
    assert main(["export", str(batch), "--format", fmt, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--format {fmt} writes" in err and "name it" in err
    assert not out.exists()


def test_a_directory_without_a_manifest_reads_as_one_sentence(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(tmp_path), "--format", "parquet",
                 "--out", str(tmp_path / "x.parquet")]) == 2
    err = capsys.readouterr().err
    assert "?." not in err and "a batch directory; pass a batch directory" not in err
    assert "no manifest at" in err and "; pass a batch directory" in err


def plant(state: Path, final: BatchState, **fields: object) -> BatchRecord:
    out_dir = state / "out"
    record = BatchRecord(id="20260101-000000-done", name="night", out_dir=str(out_dir),
                         socket=str(out_dir / "control.sock"), log=str(out_dir / "worker.log"),
                         config=stored_config(out_dir), created_at=time.time(),
                         final_state=final, **fields)  # type: ignore[arg-type]
    Registry(state / "batches").save(record)
    return record


def test_stopping_a_done_batch_says_there_is_nothing_to_stop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("EAGLE_TUI_STATE_DIR", str(tmp_path))
    record = plant(tmp_path, BatchState.DONE)
    assert main(["stop", record.id]) != 0
    err = capsys.readouterr().err
    assert "it is done; nothing left to stop" in err and "it has finished" not in err


def test_status_prints_batches_as_sentences_not_json() -> None:
    running = BatchLine(id="b1", name="night", state=BatchState.RUNNING, out_dir="/o",
                        detail=None,
                        counts=Progress(already_done=10, done=110, total=400, failed=2,
                                        samples_per_s=3.1, eta_s=90.0))
    starting = BatchLine(id="b2", name="", state=BatchState.STARTING, out_dir="/p",
                         detail=None, counts=NoProgress())
    text = render_text(StatusReport(servers=[], batches=[running, starting], exit_code=0))
    assert "{" not in text and printable_json(running.counts) not in text
    assert text.splitlines() == [
        "batch b1 night: running  rows 120/400 · failed 2 · 3.1 samples/s · ETA 1m30s",
        "batch b2: starting  (no progress saved yet)"]

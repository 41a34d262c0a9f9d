"""``batches --slurm-job`` against a hostile ``squeue`` (a fake one first on PATH) and a
tampered slice manifest (issue 39 item 16): bytes that are not UTF-8, an array index that is
a digit only to ``str.isdigit`` (``²``), a ``squeue`` that never answers, a manifest whose
Slurm task id is ``abc``. Each is one line on stderr and exit 2, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from eagle_tui.core.batches import slurmjob
from eagle_tui.tui.cli.main import main

FIXTURE = Path(__file__).parent.parent / "fixtures" / "written_by_b53df5b" / "batch"
JOB = "812"
RUNNING = f"0|{JOB}_0|{JOB}|0|RUNNING|None|vm|0:01|2026-12-01T21:45:00\n"


def fake_squeue(bin_dir: Path, body: str) -> Path:
    """An executable ``squeue`` in ``bin_dir`` running ``body`` (Python, ``sys`` imported)."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "squeue"
    script.write_text(f"#!{sys.executable}\nimport os, subprocess, sys, time\n{body}\n")
    script.chmod(0o755)
    return script


def printing(bin_dir: Path, data: bytes) -> Path:
    return fake_squeue(bin_dir, f"sys.stdout.buffer.write({data!r})")


def run_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                capsys: pytest.CaptureFixture[str], runs: Path | None = None) -> tuple[int, str]:
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    runs = runs or tmp_path / "runs"
    runs.mkdir(exist_ok=True)
    code = main(["batches", "--slurm-job", JOB, "--runs", str(runs)])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return code, err


def test_output_that_is_not_utf8_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    printing(tmp_path / "bin", RUNNING.replace("vm", "v\udcffm").encode("utf-8",
                                                                      "surrogateescape"))
    code, err = run_batches(tmp_path, monkeypatch, capsys)
    assert code == 2
    assert err.startswith("eagle-tui: squeue printed bytes that are not UTF-8 (byte ")
    assert f"run `squeue -h -r -t all -j {JOB}` to see what it prints" in err


@pytest.mark.parametrize("index", ["²", "٣", "1" * 5000, "-1", ""])
def test_an_index_that_is_not_ascii_digits_is_one_line(
        index: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    printing(tmp_path / "bin", RUNNING.replace(f"|{JOB}|0|", f"|{JOB}|{index}|").encode())
    code, err = run_batches(tmp_path, monkeypatch, capsys)
    assert code == 2
    assert f"squeue printed array index {index[:40]!r} for Slurm job {JOB}, not a number" in err


def test_a_squeue_that_hangs_is_one_line_and_leaves_nothing_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # it starts a child holding the pipes too: killing squeue alone would leave the wait hung
    pids = tmp_path / "pids"
    fake_squeue(tmp_path / "bin", (
        "child = subprocess.Popen(['sleep', '600'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        "time.sleep(600)"))
    monkeypatch.setattr(slurmjob, "SQUEUE_TIMEOUT_S", 1.0)  # the default 60 s, shortened
    started = time.monotonic()
    code, err = run_batches(tmp_path, monkeypatch, capsys)
    assert time.monotonic() - started < 30
    assert code == 2
    assert err.startswith(f"eagle-tui: squeue -j {JOB} did not answer within 1 s")
    for pid in map(int, pids.read_text().split()):
        assert not _alive(pid), f"process {pid} of the fake squeue still runs"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead (its parent, in this process for squeue, has not reaped it)
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()


def test_a_manifest_task_id_that_is_not_an_index_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    printing(tmp_path / "bin", RUNNING.encode())
    runs = tmp_path / "runs"
    slice_dir = runs / "slice-0"
    shutil.copytree(FIXTURE, slice_dir)
    manifest = json.loads((slice_dir / "manifest.json").read_text())
    manifest["extra"] = {"partition": "0/4", "scheduler_runs": [
        {"shard": "auto", "scheduler": "slurm", "task_id": "abc", "node": "vm",
         "job_id": JOB}]}
    (slice_dir / "manifest.json").write_text(json.dumps(manifest))
    code, err = run_batches(tmp_path, monkeypatch, capsys, runs)
    assert code == 2
    assert f"the manifest in {slice_dir} records Slurm task id 'abc', not an array index" in err


def test_a_well_behaved_fake_squeue_still_lists_the_task(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    printing(tmp_path / "bin", RUNNING.encode())
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "runs").mkdir()
    assert main(["batches", "--slurm-job", JOB, "--runs", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert f"slurm job {JOB}: 1 task" in out and "RUNNING" in out

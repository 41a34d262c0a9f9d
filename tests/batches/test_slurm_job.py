"""``batches --slurm-job``: the array's tasks from what a real ``squeue`` printed
(tests/fixtures/slurm, recorded by scripts/slurm/record-fixtures.sh); the join with the slice
directories is in tests/capture/test_shard_auto.py, the live job in test_slurm_capture.py."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from support.slurm import recorded

from eagle_tui.core.batches.slurmjob import QueuedTask, follow, parse_squeue, read_queue
from eagle_tui.core.errors import ConfigError
from eagle_tui.tui.cli.main import main


def answering(name: str) -> object:
    asked: list[Sequence[str]] = []

    def squeue(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        asked.append(argv)
        return recorded(name)
    squeue.asked = asked  # type: ignore[attr-defined]
    return squeue


def test_a_running_array_lists_every_task() -> None:
    tasks = parse_squeue(recorded("squeue-running-format.txt").stdout, "1")
    assert sorted(tasks, key=lambda t: t.index) == [
        QueuedTask(0, "RUNNING", "None", "vm", "0:00"),
        QueuedTask(1, "RUNNING", "None", "vm", "0:00"),
        QueuedTask(2, "PENDING", "Resources", "", "0:00"),
        QueuedTask(3, "PENDING", "Resources", "", "0:00")]


def test_an_ended_array_has_its_states_and_categories(tmp_path: Path) -> None:
    squeue = answering("squeue-done-all-states.txt")
    view = follow("1", [tmp_path], squeue)  # type: ignore[arg-type]
    assert squeue.asked == [["squeue", "-h", "-r", "-t", "all", "-j", "1", "-o",  # type: ignore[attr-defined]
                             "%i|%A|%F|%K|%T|%r|%N|%M|%S"]]
    assert [(t.index, t.state, t.reason, t.category) for t in view.tasks] == [
        (0, "COMPLETED", "", "done"), (1, "COMPLETED", "", "done"),
        (2, "COMPLETED", "", "done"), (3, "FAILED", "NonZeroExitCode", "failed")]
    assert view.queue_known and view.slices is None and view.tasks[0].directory is None


def test_a_job_the_controller_forgot_is_not_an_error(tmp_path: Path) -> None:
    assert read_queue("999999", answering("squeue-unknown-job.txt")) is None  # type: ignore[arg-type]
    view = follow("999999", [tmp_path], answering("squeue-unknown-job.txt"))  # type: ignore[arg-type]
    assert view.tasks == () and not view.queue_known


def test_a_plain_job_and_a_missing_squeue_are_refused() -> None:
    with pytest.raises(ConfigError, match="Slurm job 7 is not an array"):
        parse_squeue("7|7|7|N/A|RUNNING|None|vm|0:01|2026-12-01T21:45:00\n", "7")

    def absent(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        raise FileNotFoundError(argv[0])
    with pytest.raises(ConfigError, match="squeue is not installed here"):
        read_queue("1", absent)


@pytest.mark.parametrize(("argv", "said"), [
    (("--slurm-job", "812_3"), "argument --slurm-job: '812_3': want the array's job id"),
    (("--slurm-job", "1", "--runs", "/nonexistent/runs"),
     "argument --runs: '/nonexistent/runs' does not exist; give the slice directory"),
])
def test_bad_values_are_argparse_errors(argv: tuple[str, ...], said: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["batches", *argv])
    assert exit_.value.code == 2 and said in capsys.readouterr().err.splitlines()[-1]


def test_runs_without_a_job_is_refused_in_one_line(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    assert main(["batches", "--runs", str(tmp_path)]) == 2
    assert capsys.readouterr().err == "eagle-tui: --runs goes with --slurm-job ID\n"


def test_a_host_without_squeue_is_told_where_to_run(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["batches", "--slurm-job", "812", "--runs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("eagle-tui: squeue is not installed here")

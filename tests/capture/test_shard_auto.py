"""``capture --shard auto``: the slice from the scheduler's environment through the CLI, the
manifest's record of each start, refusals as argparse errors, and requeue as resume with real
processes (a capture killed the ways a scheduler kills it, restarted with the environment a
real Slurm gave a requeued array task: ``tests/fixtures/slurm``)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from support.crashresume import assert_only_valid_shards, rows_stored
from support.slurm import recorded
from support.waiting import exited, wait_until
from test_e2e_support import ROOT
from test_engine_fakes import write_prompts
from test_scheduler_env import runs_of

from eagle_tui.core.batches.slurmjob import follow
from eagle_tui.core.capture.partition import Partition
from eagle_tui.core.capture.scheduler_env import SchedulerSlice
from eagle_tui.core.export.options import ExportOptions
from eagle_tui.core.export.run import export
from eagle_tui.core.shards.manifest import Manifest, SchedulerRun
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.tokenizer import bundled_tokenizer_path
from eagle_tui.tui.cli import capture as cli
from eagle_tui.tui.cli.main import main

StartSim = Callable[..., SimProcess]
SCHEDULER_PREFIXES = ("SLURM", "OMPI_COMM_WORLD_", "PMI_")
SCHEDULER_NAMES = ("RANK", "WORLD_SIZE", "JOB_COMPLETION_INDEX", "TORCHELASTIC_RUN_ID",
                   "TORCHELASTIC_RESTART_COUNT", "JOB_NAME", "NODE_NAME")


def slurm_task(name: str, run: int = -1) -> dict[str, str]:
    """A recorded array task's SLURM_* variables (its ``run``-th start), without the
    recording cluster's SLURM_CONF."""
    env = runs_of(name)[run]
    return {key: value for key, value in env.items() if key != "SLURM_CONF"}


TASK_1 = slurm_task("env-array-0-3-task-1.txt", 0)           # array 1, task 1 of 0-3
TASK_1_REQUEUED = slurm_task("env-array-0-3-task-1.txt", 1)  # the same, SLURM_RESTART_COUNT=1
TASK_2 = slurm_task("env-array-0-3-task-2.txt")


def scheduler_free(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` without any scheduler's variables (the test may itself run under one)."""
    return {key: value for key, value in environ.items()
            if not key.startswith(SCHEDULER_PREFIXES) and key not in SCHEDULER_NAMES}


@pytest.fixture
def in_task(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """This process's environment with no scheduler in it; tests add the one they want. The
    current directory holds BASE's prompt file (--prompts is checked to exist)."""
    for key in os.environ.keys() - scheduler_free(dict(os.environ)).keys():
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    write_prompts(tmp_path / "p.jsonl", 3)
    return monkeypatch


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="eagle-tui capture")
    cli.add_arguments(parser)
    return parser.parse_args(list(argv))


BASE = ("--prompts", "p.jsonl", "--out", "out", "--server", "http://a:1",
        "--tokenizer", str(bundled_tokenizer_path()))


# -- the CLI: slice and resume from the environment ---------------------------------------------


def test_auto_takes_the_array_task_as_the_slice_and_resumes(in_task: pytest.MonkeyPatch) -> (
    None
):
    for key, value in TASK_1_REQUEUED.items():
        in_task.setenv(key, value)
    args = parse(*BASE, "--shard", "auto")
    assert isinstance(args.shard, SchedulerSlice)
    assert args.shard.describe() == "slice 1/4 from slurm job 1 task 1 on node vm, restart 1"
    config = cli.config_from_args(args)
    assert config.partition == Partition(1, 4) and config.resume
    assert not cli.config_from_args(parse(*BASE, "--shard", "auto", "--resume", "no")).resume
    assert cli.config_from_args(parse(*BASE, "--shard", "auto/8")).partition == Partition(1, 8)


def test_resume_stays_opt_in_without_a_scheduler(in_task: pytest.MonkeyPatch) -> None:
    assert not cli.config_from_args(parse(*BASE)).resume
    assert not cli.config_from_args(parse(*BASE, "--shard", "1/4")).resume
    for resume in (("--resume",), ("--resume", "auto")):
        config = cli.config_from_args(parse(*BASE, "--shard", "1/4", *resume))
        assert config.resume and config.partition == Partition(1, 4)


@pytest.mark.parametrize(("env", "argv", "said"), [
    ({}, ("--shard", "auto"), "argument --shard: auto: no scheduler slice in the environment"),
    (TASK_1 | {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1"}, ("--shard", "auto"),
     "name different slices"),
    (TASK_1, ("--shard", "auto/2"), "past slice 1 of 2"),
    ({"JOB_COMPLETION_INDEX": "3"}, ("--shard", "auto"), "give --shard auto/N"),
    ({}, ("--shard", "auto/0"), "argument --shard: auto/0: N must be at least 1"),
    ({}, ("--shard", "auto/x"), "want auto or auto/N"),
    ({}, ("--shard", "4/4"), "argument --shard: 4/4: want I/N with 0 <= I < N"),
    ({}, ("--shard", "half"), "argument --shard: 'half': want I/N"),
    ({}, ("--resume", "maybe"), "argument --resume: invalid choice: 'maybe'"),
])
def test_bad_values_and_environments_are_argparse_errors(
        in_task: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: dict[str, str],
        argv: tuple[str, ...], said: str) -> None:
    for key, value in env.items():
        in_task.setenv(key, value)
    with pytest.raises(SystemExit) as exit_:
        parse(*BASE, *argv)
    assert exit_.value.code == 2
    error = [line for line in capsys.readouterr().err.splitlines()
             if not line.startswith(("usage:", " "))]
    assert len(error) == 1 and error[0].startswith("eagle-tui capture: error: "), error
    assert said in error[0]


def test_the_real_command_refuses_a_missing_scheduler_in_one_line(tmp_path: Path) -> None:
    write_prompts(tmp_path / "p.jsonl", 3)
    done = subprocess.run(
        [sys.executable, "-m", "eagle_tui.tui.cli", "capture", *BASE, "--shard", "auto"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env=scheduler_free(dict(os.environ)) | {"SLURM_JOB_ID": "77"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith("eagle-tui capture: error: argument --shard: auto: no scheduler "
                           "slice in the environment (Slurm job 77 is not an array task)")
    assert not (tmp_path / "out").exists()


def test_auto_is_not_detached(in_task: pytest.MonkeyPatch, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    for key, value in TASK_1.items():
        in_task.setenv(key, value)
    write_prompts(tmp_path / "p.jsonl", 3)
    code = main(["capture", "--prompts", str(tmp_path / "p.jsonl"), "--out",
                 str(tmp_path / "out"), "--server", "http://127.0.0.1:9", "--tokenizer",
                 str(bundled_tokenizer_path()), "--shard", "auto", "--detach"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("eagle-tui capture: --shard auto runs in the foreground")


# -- requeue is resume: real processes --------------------------------------------------------

PROMPTS = 400


def capture_args(prompts: Path, out: Path, url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "eagle_tui.tui.cli", "capture", "--display", "plain",
            "--prompts", str(prompts), "--out", str(out), "--server", url,
            "--tokenizer", str(bundled_tokenizer_path()), "--max-new-tokens", "24",
            "--temperature", "0", "--concurrency", "3", "--shard-rows", "5", "--grace", "5",
            *extra]


def task_env(scheduler: dict[str, str]) -> dict[str, str]:
    return scheduler_free(dict(os.environ)) | scheduler


def start_task(argv: list[str], scheduler: dict[str, str], log: Path) -> (
    subprocess.Popen[bytes]
):
    with open(log, "ab") as stderr:
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT,
                                env=task_env(scheduler))


def run_task(argv: list[str], scheduler: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT,
                          env=task_env(scheduler), timeout=240)


def exported(directory: Path, out: Path) -> list[str]:
    """The speculators export of ``directory`` (one slice of four: a partial job on purpose),
    rows sorted, without what only says which request made a row (rid, when, how long, which
    server)."""
    export([directory], out, ExportOptions(format="speculators", allow_partial=True))
    rows = []
    for line in out.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for key in ("rid", "created_at", "latency_s", "endpoint"):
            row["metadata"].pop(key, None)
        rows.append(json.dumps(row, sort_keys=True))
    return sorted(rows)


def test_a_requeued_task_continues_its_slice_exactly_once(tmp_path: Path, start_sim: StartSim,
                                                         sim_server: SimProcess) -> None:
    # The runs that are killed send to a slow server, so that a loaded machine cannot finish
    # the slice before they are; the servers may change between runs (the sim's answer is a
    # function of the prompt and the sampling only, like SGLang's with temperature 0).
    slow = start_sim("--tokens-per-s", "15", "--ttft", "0.02")
    prompts = write_prompts(tmp_path / "prompts.jsonl", PROMPTS)
    reference = run_task(capture_args(prompts, tmp_path / "reference", sim_server.url,
                                      "--shard", "1/4"), {})
    assert reference.returncode == 0, reference.stderr[-2000:]
    out = tmp_path / "slice-1"
    argv = capture_args(prompts, out, slow.url, "--shard", "auto")
    log = tmp_path / "task.log"

    first = start_task(argv, TASK_1, log)
    wait_until(rows_stored(out, 10), 120, "10 rows stored by the first run",
               unless=exited(first, "the first run"))
    twin = run_task(argv, TASK_1)    # two live tasks on one slice: the lock refuses the second
    assert twin.returncode == 2 and "is already being captured by" in twin.stderr
    first.send_signal(signal.SIGTERM)    # Slurm's requeue and preemption: SIGTERM first
    # stopped cleanly, rows left: 128 + SIGTERM, as a shell reports it (issue 20)
    assert first.wait(timeout=60) == 143, log.read_text()[-2000:]
    after_first = Manifest.load(out).counts.done
    total = sum(assert_only_valid_shards(tmp_path / "reference").values())
    assert 10 <= after_first < total - 20, "the first run stopped mid-slice"

    second = start_task(argv, TASK_1_REQUEUED, log)
    wait_until(rows_stored(out, after_first + 5), 120, "5 more rows stored",
               unless=exited(second, "the requeued run"))
    second.kill()                         # a node failure: no grace at all
    second.wait(timeout=30)
    assert Manifest.load(out).counts.done < total, "the second run was killed mid-slice"

    finish = capture_args(prompts, out, sim_server.url, "--shard", "auto")
    third = run_task(finish, TASK_1_REQUEUED | {"SLURM_RESTART_COUNT": "2"})
    assert third.returncode == 0, third.stderr[-2000:]
    assert "slice 1/4 from slurm job 1 task 1 on node vm, restart 2" in third.stderr

    stored = assert_only_valid_shards(out)
    assert stored == assert_only_valid_shards(tmp_path / "reference")
    assert set(stored.values()) == {1}, "no row twice"
    assert exported(out, tmp_path / "slice.jsonl") == exported(
        tmp_path / "reference", tmp_path / "reference.jsonl"), "no row lost or changed"
    manifest = Manifest.load(out)
    assert manifest.extra.partition == "1/4" and manifest.counts.done == sum(stored.values())
    runs = manifest.extra.scheduler_runs
    assert [run.restart_count for run in runs] == [0, 1, 2]
    assert {(run.shard, run.scheduler, run.job_id, run.task_id, run.node) for run in runs} == {
        ("1/4", "slurm", "1", "1", "vm")}
    assert runs[0].evidence == ("SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=4 "
                                "SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=3")
    on_disk = json.loads((out / "manifest.json").read_text())["extra"]["scheduler_runs"][0]
    assert on_disk["from"] == runs[0].evidence and on_disk["started_at"]
    assert isinstance(runs[0], SchedulerRun)


def test_a_directory_of_another_slice_or_a_fresh_start_is_refused(
        tmp_path: Path, sim_server: SimProcess) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", 40)
    out = tmp_path / "slice-1"
    argv = capture_args(prompts, out, sim_server.url, "--shard", "auto")
    done = run_task(argv, TASK_1)
    assert done.returncode == 0, done.stderr[-2000:]
    before = assert_only_valid_shards(out)

    other = run_task(argv, TASK_2)        # task 2 pointed at task 1's directory
    assert other.returncode == 2
    assert other.stderr.strip().splitlines()[-1] == (
        f"eagle-tui capture: {out} holds slice 1/4 of its prompts, not 2/4; resume it with "
        "--shard 1/4")
    no_resume = run_task([*argv, "--resume", "no"], TASK_1_REQUEUED)
    assert no_resume.returncode == 2 and "already holds a batch" in no_resume.stderr
    again = run_task(argv, TASK_1_REQUEUED)   # a finished slice requeued: nothing to do
    assert again.returncode == 0, again.stderr[-2000:]
    assert assert_only_valid_shards(out) == before and sum(before.values()) > 0
    assert Counter(run.restart_count for run in Manifest.load(out).extra.scheduler_runs) == {
        0: 1, 1: 1}

    # Followed from a head node: the queue a real squeue printed while tasks 0 and 1 ran,
    # joined with this slice's manifest (tests/batches/test_slurm_job.py: the queue alone).
    view = follow("1", [tmp_path], lambda argv: recorded("squeue-running-format.txt"))
    assert [(t.index, t.state, t.slice, t.rows, t.restarts, t.directory) for t in view.tasks] == [
        (0, "RUNNING", "", 0, 0, None), (1, "RUNNING", "1/4", sum(before.values()), 1, out),
        (2, "PENDING", "", 0, 0, None), (3, "PENDING", "", 0, 0, None)]
    assert (view.slices, view.count("running"), view.count("pending"), view.requeues) == (
        4, 2, 2, 1)
    gone = follow("1", [out], lambda argv: recorded("squeue-unknown-job.txt"))
    assert [(t.index, t.state, t.category, t.node) for t in gone.tasks] == [
        (1, "finished", "done", "vm")]
    assert not gone.queue_known

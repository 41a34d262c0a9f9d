"""``--shard auto``: the slice from the scheduler's environment (core.capture.scheduler_env).

The Slurm environments are the ones a real Slurm 22.05 gave its array tasks
(tests/fixtures/slurm/env-*.txt, recorded by scripts/slurm/record-fixtures.sh), and those of
torchrun, Open MPI and MPICH what they gave their processes (tests/fixtures/slurm/launchers/,
see PROVENANCE.md there); a Kubernetes pod's are written from Kubernetes' documentation. The
last test runs the module inside the tasks of a real ``sbatch --array=0-3`` (opt-in:
``EAGLE_SLURM_CONF`` names the slurm.conf of a cluster started with
``scripts/slurm/slurm.sh start DIR``), requeueing one task.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.waiting import wait_until

from eagle_tui.core.capture.partition import Partition
from eagle_tui.core.capture.scheduler_env import (
    AutoShard,
    Scheduler,
    SchedulerSlice,
    parse_shard,
    slice_from_environment,
)
from eagle_tui.core.errors import ConfigError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "slurm"
AUTO = AutoShard()


def runs_of(name: str) -> list[dict[str, str]]:
    """The SLURM_* environment of each run recorded in a fixture (a requeued task ran twice,
    appending to one file; ``srun --label`` prefixes each line with its task)."""
    runs: list[dict[str, str]] = [{}]
    for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines():
        _, _, line = line.rpartition(": ") if line[:1].isdigit() else ("", "", line)
        key, sep, value = line.partition("=")
        if not sep or not key.startswith("SLURM"):
            continue
        if key in runs[-1]:
            runs.append({})
        runs[-1][key] = value
    return runs


def env_of(name: str) -> dict[str, str]:
    return runs_of(name)[-1]


def launcher_env(name: str) -> dict[str, str]:
    """A launcher's variables as recorded in tests/fixtures/slurm/launchers/NAME."""
    lines = (FIXTURES / "launchers" / name).read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def refusal(auto: AutoShard, env: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as caught:
        slice_from_environment(auto, env, hostname="host")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("--shard auto")
    return message


# -- --shard's value ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "parsed"), [
    ("auto", AutoShard()), (" auto / 8 ", AutoShard(8)), ("auto/1", AutoShard(1)),
    ("3/4", Partition(3, 4)),
])
def test_parse_shard_reads_every_form(text: str, parsed: object) -> None:
    assert parse_shard(text) == parsed


@pytest.mark.parametrize(("text", "said"), [
    ("auto/0", "at least 1"), ("auto/x", "auto/N with N a whole number"),
    ("auto/-2", "whole number"), ("automatic", "want I/N (e.g. 0/4), auto"),
    ("4/4", "0 <= I < N"), ("", "want I/N"),
])
def test_parse_shard_refuses_with_the_forms(text: str, said: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(said)):
        parse_shard(text)


def test_auto_shard_prints_as_given() -> None:
    assert [str(AutoShard()), str(AutoShard(16))] == ["auto", "auto/16"]


# -- Slurm job arrays (environments a real Slurm set) ------------------------------------------


# The array's id, which the record keeps: each task has a job id of its own (SLURM_JOB_ID).
ARRAY_JOB = env_of("env-array-0-3-task-0.txt")["SLURM_ARRAY_JOB_ID"]


@pytest.mark.parametrize("task", range(4))
def test_each_task_of_a_real_array_0_3_is_its_slice(task: int) -> None:
    found = slice_from_environment(AUTO, env_of(f"env-array-0-3-task-{task}.txt"), "other")
    assert found == SchedulerSlice(
        Partition(task, 4), Scheduler.SLURM, ARRAY_JOB, str(task), 0 if task != 1 else 1, "vm",
        (f"SLURM_ARRAY_TASK_ID={task}", "SLURM_ARRAY_TASK_COUNT=4", "SLURM_ARRAY_TASK_MIN=0",
         "SLURM_ARRAY_TASK_MAX=3"))


def test_a_requeued_task_keeps_its_slice_and_counts_the_restart() -> None:
    first, again = runs_of("env-array-0-3-task-1.txt")
    assert "SLURM_RESTART_COUNT" not in first
    before, after = (slice_from_environment(AUTO, env) for env in (first, again))
    assert (before.partition, before.restart_count) == (Partition(1, 4), 0)
    assert (after.partition, after.restart_count) == (Partition(1, 4), 1)
    assert again["SLURM_JOB_ID"] != ARRAY_JOB
    assert after.describe() == f"slice 1/4 from slurm job {ARRAY_JOB} task 1 on node vm, restart 1"


def test_the_manifest_record_of_a_slurm_task() -> None:
    record = slice_from_environment(AUTO, env_of("env-array-0-3-task-2.txt")).record()
    assert record == {"shard": "2/4", "scheduler": "slurm", "job_id": ARRAY_JOB, "task_id": "2",
                      "restart_count": 0, "node": "vm",
                      "from": "SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_COUNT=4 "
                              "SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=3"}


@pytest.mark.parametrize(("fixture", "ids"), [
    ("env-array-0-15-step-2-task-4.txt", "ids from 0 to 14"),
    ("env-array-1-4-task-1.txt", "ids from 1 to 4"),
    ("env-array-1,3,7-task-3.txt", "ids from 1 to 7"),
])
def test_an_array_not_numbered_from_0_needs_the_count(fixture: str, ids: str) -> None:
    message = refusal(AUTO, env_of(fixture))
    assert ids in message and "not 0..N-1" in message
    assert "sbatch --array=0-N-1" in message and "--shard auto/N" in message


@pytest.mark.parametrize(("fixture", "count", "index"), [
    ("env-array-0-15-step-2-task-4.txt", 16, 4),
    ("env-array-1-4-task-1.txt", 5, 1),
    ("env-array-1,3,7-task-3.txt", 8, 3),
    ("env-array-0-3-task-3.txt", 8, 3),      # slices 0-3 of 8 now, 4-7 in another array
])
def test_with_auto_n_the_task_id_is_the_slice(fixture: str, count: int, index: int) -> None:
    found = slice_from_environment(AutoShard(count), env_of(fixture))
    assert found.partition == Partition(index, count)


@pytest.mark.parametrize(("fixture", "count", "highest"), [
    ("env-array-0-15-step-2-task-4.txt", 14, 14),
    ("env-array-1-4-task-1.txt", 4, 4),
    ("env-array-0-3-task-0.txt", 3, 3),
])
def test_auto_n_below_the_arrays_largest_id_is_refused_in_every_task(
        fixture: str, count: int, highest: int) -> None:
    message = refusal(AutoShard(count), env_of(fixture))
    assert f"up to {highest}" in message and f"N > {highest}" in message


def test_one_task_re_run_alone_with_auto_n() -> None:
    env = {"SLURM_ARRAY_JOB_ID": "90", "SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "1",
           "SLURM_ARRAY_TASK_MIN": "5", "SLURM_ARRAY_TASK_MAX": "5"}
    assert "ids from 5 to 5" in refusal(AUTO, env)
    assert slice_from_environment(AutoShard(16), env).partition == Partition(5, 16)


def test_an_old_slurm_without_the_count_goes_by_min_and_max() -> None:
    env = {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "3"}
    assert slice_from_environment(AUTO, env, "n1").partition == Partition(2, 4)


def test_an_array_task_id_alone_needs_the_count() -> None:
    env = {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4"}
    assert "does not say its array's ids" in refusal(AUTO, env)
    assert slice_from_environment(AutoShard(4), env, "n1").partition == Partition(2, 4)


def test_a_slurm_job_that_is_no_array_is_refused_with_what_to_submit() -> None:
    env = env_of("env-plain-job.txt")
    message = refusal(AUTO, env)
    assert f"Slurm job {env['SLURM_JOB_ID']} is not an array task" in message
    assert "sbatch --array=0-N-1" in message and "--shard I/N" in message


def test_srun_starting_two_processes_in_one_array_task_is_refused() -> None:
    message = refusal(AutoShard(4), env_of("env-array-srun-n2-task-0.txt"))
    assert "srun started 2 processes in Slurm array task 0" in message


def test_the_node_is_slurms_name_else_the_host_name() -> None:
    env = {k: v for k, v in env_of("env-array-0-3-task-0.txt").items() if k != "SLURMD_NODENAME"}
    assert slice_from_environment(AUTO, env, "gpu07").node == "gpu07"
    assert slice_from_environment(AUTO, env).node == socket.gethostname()


@pytest.mark.parametrize(("change", "said"), [
    ({"SLURM_ARRAY_TASK_ID": "3a"}, "SLURM_ARRAY_TASK_ID='3a' is not a whole number"),
    ({"SLURM_ARRAY_TASK_COUNT": ""}, "SLURM_ARRAY_TASK_COUNT='' is not a whole number"),
    ({"SLURM_RESTART_COUNT": "x"}, "SLURM_RESTART_COUNT='x' is not a whole number"),
    ({"SLURM_ARRAY_TASK_ID": "7"}, "do not fit together"),
    ({"SLURM_ARRAY_TASK_COUNT": "0"}, "do not fit together"),
])
def test_slurm_variables_that_make_no_sense_are_refused(change: dict[str, str],
                                                        said: str) -> None:
    assert said in refusal(AUTO, env_of("env-array-0-3-task-1.txt") | change)


# -- Kubernetes Indexed Jobs -------------------------------------------------------------------

POD = {"JOB_COMPLETION_INDEX": "3", "KUBERNETES_SERVICE_HOST": "10.96.0.1",
       "HOSTNAME": "capture-3-x7k2p"}


def test_an_indexed_job_pod_takes_its_index_and_the_count_from_auto_n() -> None:
    found = slice_from_environment(AutoShard(8), POD, hostname="capture-3-x7k2p")
    assert found == SchedulerSlice(Partition(3, 8), Scheduler.KUBERNETES, None, "3", None,
                                   "capture-3-x7k2p", ("JOB_COMPLETION_INDEX=3",))
    assert "restart_count" not in found.record() and "job_id" not in found.record()


def test_a_pod_names_its_job_and_node_through_the_downward_api() -> None:
    env = POD | {"JOB_NAME": "capture", "NODE_NAME": "gpu-node-12"}
    found = slice_from_environment(AutoShard(8), env, hostname="capture-3-x7k2p")
    assert (found.job_id, found.node) == ("capture", "gpu-node-12")
    assert found.describe() == "slice 3/8 from kubernetes job capture task 3 on node gpu-node-12"


def test_an_indexed_job_without_auto_n_is_refused_with_what_to_give() -> None:
    message = refusal(AUTO, POD)
    assert "JOB_COMPLETION_INDEX=3" in message and "--shard auto/N" in message
    assert "spec.completions" in message


def test_an_index_past_auto_n_is_refused() -> None:
    assert "N > 3" in refusal(AutoShard(3), POD)


# -- torchrun, Open MPI, PMI -------------------------------------------------------------------

@pytest.mark.parametrize(("rank", "restart"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_real_torchrun_ranks_and_restarts(rank: int, restart: int) -> None:
    env = launcher_env(f"torchrun-rank-{rank}-restart-{restart}.txt")
    found = slice_from_environment(AUTO, env, hostname="node2")
    assert found == SchedulerSlice(Partition(rank, 2), Scheduler.TORCHRUN,
                                   env["TORCHELASTIC_RUN_ID"], str(rank), restart, "node2",
                                   (f"RANK={rank}", "WORLD_SIZE=2"))
    assert slice_from_environment(AutoShard(2), env).partition == Partition(rank, 2)


def test_auto_n_that_contradicts_the_world_size_is_refused() -> None:
    message = refusal(AutoShard(8), launcher_env("torchrun-rank-1-restart-0.txt"))
    assert "runs 2 processes" in message and "--shard auto/2" in message


@pytest.mark.parametrize(("fixture", "scheduler", "evidence"), [
    ("openmpi-rank-{}.txt", Scheduler.OPEN_MPI, "OMPI_COMM_WORLD_RANK={} OMPI_COMM_WORLD_SIZE=2"),
    ("mpich-rank-{}.txt", Scheduler.PMI, "PMI_RANK={} PMI_SIZE=2"),
])
@pytest.mark.parametrize("rank", [0, 1])
def test_real_mpi_launchers_rank_of_size(fixture: str, scheduler: Scheduler, evidence: str,
                                         rank: int) -> None:
    found = slice_from_environment(AUTO, launcher_env(fixture.format(rank)), hostname="n1")
    assert (found.partition, found.scheduler, found.task_id) == (Partition(rank, 2), scheduler,
                                                                 str(rank))
    assert " ".join(found.evidence) == evidence.format(rank)
    assert found.restart_count is None and found.job_id is None


def test_rank_and_world_size_without_torchrun_record_no_restart_count() -> None:
    found = slice_from_environment(AUTO, {"RANK": "1", "WORLD_SIZE": "3"}, hostname="n1")
    assert (found.partition, found.restart_count, found.job_id) == (Partition(1, 3), None, None)


@pytest.mark.parametrize(("env", "said"), [
    ({"RANK": "2"}, "RANK=2 is set but WORLD_SIZE is not"),
    ({"WORLD_SIZE": "4"}, "WORLD_SIZE=4 is set but RANK is not"),
    ({"OMPI_COMM_WORLD_RANK": "0"}, "but OMPI_COMM_WORLD_SIZE is not"),
    ({"PMI_SIZE": "2"}, "but PMI_RANK is not"),
    ({"RANK": "4", "WORLD_SIZE": "4"}, "a rank must be below the size"),
    ({"RANK": "-1", "WORLD_SIZE": "4"}, "RANK='-1' is not a whole number"),
    ({"JOB_COMPLETION_INDEX": "three"}, "JOB_COMPLETION_INDEX='three' is not a whole number"),
])
def test_launcher_variables_that_make_no_sense_are_refused(env: dict[str, str],
                                                           said: str) -> None:
    assert said in refusal(AutoShard(4), env)


# -- several schedulers at once ----------------------------------------------------------------


def test_schedulers_that_agree_record_the_outermost() -> None:
    slurm = env_of("env-array-0-3-task-2.txt")
    found = slice_from_environment(AUTO, slurm | {"RANK": "2", "WORLD_SIZE": "4"})
    assert (found.scheduler, found.partition) == (Scheduler.SLURM, Partition(2, 4))
    assert found.evidence[-2:] == ("RANK=2", "WORLD_SIZE=4")


def test_a_pod_under_torchrun_takes_the_count_from_the_world_size() -> None:
    found = slice_from_environment(AUTO, POD | {"RANK": "3", "WORLD_SIZE": "8"})
    assert (found.scheduler, found.partition) == (Scheduler.KUBERNETES, Partition(3, 8))


@pytest.mark.parametrize(("extra", "names"), [
    ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1"}, ("slurm", "openmpi")),
    ({"RANK": "1", "WORLD_SIZE": "8"}, ("slurm", "torchrun")),           # same index, count
    ({"JOB_COMPLETION_INDEX": "2"}, ("slurm", "kubernetes")),
])
def test_schedulers_that_disagree_are_refused(extra: dict[str, str],
                                              names: tuple[str, str]) -> None:
    message = refusal(AUTO, env_of("env-array-0-3-task-1.txt") | extra)
    assert f"{names[0]} (SLURM_ARRAY_TASK_ID=1" in message and f"{names[1]} (" in message
    assert "name different slices" in message and "--shard I/N" in message


def test_a_real_mpirun_inside_a_real_array_task_is_refused() -> None:
    env = env_of("env-array-0-3-task-1.txt") | launcher_env("openmpi-rank-1.txt")
    message = refusal(AUTO, env)       # index 1 both, but 1 of 4 against 1 of 2
    assert "slurm (SLURM_ARRAY_TASK_ID=1" in message
    assert "openmpi (OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2)" in message


def test_a_count_from_one_scheduler_is_checked_against_the_others_ids() -> None:
    env = env_of("env-array-1-4-task-1.txt") | {"RANK": "1", "WORLD_SIZE": "4"}
    message = refusal(AUTO, env)        # torchrun says 4, but the array has a task 4
    assert message.startswith("--shard auto: slurm numbers this job's tasks up to 4")
    assert "past slice 3 of 4" in message


def test_two_launchers_disagreeing_without_slurm_are_refused() -> None:
    message = refusal(AUTO, {"RANK": "0", "WORLD_SIZE": "2", "PMI_RANK": "1", "PMI_SIZE": "2"})
    assert "torchrun (RANK=0 WORLD_SIZE=2) and pmi (PMI_RANK=1 PMI_SIZE=2)" in message


# -- nothing at all ----------------------------------------------------------------------------


def test_no_scheduler_is_refused_with_what_to_set() -> None:
    message = refusal(AutoShard(4), {"HOME": "/root", "LOCAL_RANK": "0"})
    assert message.startswith("--shard auto/4: no scheduler slice in the environment")
    for what in ("sbatch --array=0-N-1", "JOB_COMPLETION_INDEX", "RANK", "WORLD_SIZE",
                 "OMPI_COMM_WORLD_RANK", "PMI_RANK", "--shard I/N"):
        assert what in message


# -- inside a real Slurm array (opt-in) --------------------------------------------------------

SLURM_CONF = os.environ.get("EAGLE_SLURM_CONF")

ASK = """
import json, os
from eagle_tui.core.capture.scheduler_env import AutoShard, slice_from_environment
try:
    print(json.dumps(slice_from_environment(AutoShard(), os.environ).record()))
except Exception as error:
    print(json.dumps({"refused": str(error)}))
"""


class RealSlurm:
    """Slurm's commands against the cluster EAGLE_SLURM_CONF names."""

    def __init__(self, conf: str) -> None:
        self.env = os.environ | {"SLURM_CONF": conf}

    def run(self, *argv: str) -> str:
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=60)
        assert done.returncode == 0, f"{' '.join(argv)}: {done.stderr}"
        return done.stdout.strip()

    def state(self, job: str) -> str:
        lines = self.run("squeue", "-h", "-r", "-j", job, "-o", "%T").splitlines()
        return lines[0] if lines else "GONE"

    def node(self) -> str:
        return self.run("sinfo", "-h", "-o", "%N")


@pytest.mark.slow
@pytest.mark.skipif(not SLURM_CONF, reason="set EAGLE_SLURM_CONF to the slurm.conf of a running "
                    "cluster (scripts/slurm/slurm.sh start DIR)")
def test_inside_a_real_slurm_array_each_task_gets_its_slice(tmp_path: Path) -> None:
    assert SLURM_CONF and shutil.which("sbatch"), "sbatch is not on PATH"
    slurm = RealSlurm(SLURM_CONF)
    (tmp_path / "ask.py").write_text(ASK, encoding="utf-8")
    job_script = tmp_path / "job.sh"
    job_script.write_text(
        f"#!/bin/sh\n{sys.executable} {tmp_path}/ask.py >> {tmp_path}/answer-$SLURM_ARRAY_TASK_ID\n"
        f"while [ ! -e {tmp_path}/release ]; do sleep 0.1; done\n", encoding="utf-8")
    job = slurm.run("sbatch", "--parsable", "--array=0-3", "--requeue", "--open-mode=append",
                    "-o", f"{tmp_path}/slurm-%a.out", str(job_script))
    answers = [tmp_path / f"answer-{task}" for task in range(4)]
    try:
        wait_until(lambda: answers[1].exists() and answers[1].read_text().endswith("\n"), 120,
                   what="array task 1 to answer")
        slurm.run("scontrol", "requeue", f"{job}_1")
        wait_until(lambda: slurm.state(f"{job}_1") == "PENDING", 60, what="task 1 requeued")
        slurm.run("scontrol", "update", f"jobid={job}_1", "StartTime=now")
        (tmp_path / "release").touch()
        wait_until(lambda: slurm.state(job) == "GONE", 180, what=f"array {job} to finish")
    finally:
        subprocess.run(["scancel", job], env=slurm.env, capture_output=True, timeout=60)
    node = slurm.node()
    for task, path in enumerate(answers):
        runs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert len(runs) == (2 if task == 1 else 1), (task, runs)
        for restarts, record in enumerate(runs):
            assert record == {"shard": f"{task}/4", "scheduler": "slurm", "job_id": job,
                              "task_id": str(task), "restart_count": restarts, "node": node,
                              "from": f"SLURM_ARRAY_TASK_ID={task} SLURM_ARRAY_TASK_COUNT=4 "
                                      "SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=3"}


# -- scripts/slurm/slurm.sh: its refusals (a real run is in docs/large-capture.md) -------------

SLURM_SH = Path(__file__).resolve().parents[2] / "scripts" / "slurm" / "slurm.sh"


def slurm_sh(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SLURM_SH), *argv], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(("argv", "said"), [
    ((), "slurm.sh: error: no command given"),
    (("launch",), "slurm.sh: error: unknown command 'launch'"),
])
def test_the_script_without_a_known_command_prints_its_usage(argv: tuple[str, ...],
                                                             said: str) -> None:
    done = slurm_sh(*argv)
    assert done.returncode == 2 and done.stderr.startswith(said + "\n")
    assert "slurm.sh start DIR" in done.stderr and "slurm.sh stop DIR" in done.stderr


def test_the_script_refuses_start_without_a_directory_in_one_line() -> None:
    done = slurm_sh("start")   # not root, not installed or no DIR: each says what to do
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("slurm.sh: error: ")


def test_the_script_says_a_cluster_that_never_ran_is_stopped(tmp_path: Path) -> None:
    done = slurm_sh("status", str(tmp_path / "nothing-here"))
    assert done.returncode == 3
    assert "slurmctld: not running" in done.stdout and "slurmd:    not running" in done.stdout


@pytest.mark.skipif(not SLURM_CONF, reason="set EAGLE_SLURM_CONF to the slurm.conf of a running "
                    "cluster (scripts/slurm/slurm.sh start DIR)")
def test_the_script_says_the_running_cluster_is_up() -> None:
    done = slurm_sh("status", str(Path(SLURM_CONF or ".").parent))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "slurmctld: pid " in done.stdout and "debug*" in done.stdout

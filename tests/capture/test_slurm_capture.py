"""Opt-in, against a real Slurm (``scripts/slurm/slurm.sh start DIR``, then
``EAGLE_SLURM_CONF=DIR/slurm.conf``): the ``sbatch`` script of docs/large-capture.md, as
written there, runs ``capture --shard auto`` as a 4-task array against simulated servers behind
SGLang's router (direct when the router is not installed); one task is requeued mid-run
(``scontrol requeue``) and resumes its slice. The export of the four directories must equal
the export of one batch of the same prompts: no row lost, none twice.

The Kubernetes Indexed Job of the same page is run without a cluster: its container command,
with the variables the Job and its downward API give a pod, captures its slice and resumes it
on a retry.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.crashresume import assert_only_valid_shards, rows_stored
from support.router import RouterProcess, router_installed
from support.waiting import wait_until
from test_e2e_support import ROOT
from test_engine_fakes import write_prompts
from test_scheduler_env import RealSlurm
from test_shard_auto import scheduler_free

from eagle_tui.core.export.options import ExportOptions
from eagle_tui.core.export.run import export
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.tokenizer import bundled_tokenizer_path

pytestmark = pytest.mark.slow

SLURM_CONF = os.environ.get("EAGLE_SLURM_CONF")
DOC = ROOT / "docs" / "large-capture.md"
PROMPTS = 600
SIM = ("--time-scale", "0", "--tokens-per-s", "100", "--ttft", "0.02")
EAGLE_TUI = Path(sys.executable).with_name("eagle-tui")


def doc_block(heading: str, language: str) -> str:
    """The first ``language`` code block under ``heading`` in docs/large-capture.md."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index(heading):]
    match = re.search(rf"```{language}\n(.*?)```", section, re.S)
    assert match, f"no {language} block under {heading!r}"
    return match.group(1)


def with_site_values(text: str, values: dict[str, str]) -> str:
    """``text`` with the page's example values replaced by this machine's (each must be
    there, so the page and this test change together)."""
    for example, here in values.items():
        assert example in text, f"{example!r} is no longer in the page's example"
        text = text.replace(example, here)
    return text


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """Two simulated servers behind SGLang's router (or the first one alone without it)."""
    with ExitStack() as stack:
        sims = [stack.enter_context(SimProcess(SIM)) for _ in range(2)]
        for sim in sims:
            sim.wait_ready(60)
        if not router_installed():
            yield sims[0].url
            return
        router = stack.enter_context(RouterProcess([sim.url for sim in sims]))
        router.wait_workers(2)
        yield router.url


def exported(directories: list[Path], out: Path) -> list[str]:
    """The speculators export, rows sorted, without what only names the request."""
    export(directories, out, ExportOptions(format="speculators"))
    rows = []
    for line in out.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for key in ("rid", "created_at", "latency_s"):
            row["metadata"].pop(key, None)
        rows.append(json.dumps(row, sort_keys=True))
    return sorted(rows)


def one_batch(prompts: Path, out: Path, url: str) -> Path:
    done = subprocess.run(
        [str(EAGLE_TUI), "capture", "--prompts", str(prompts), "--out", str(out), "--server",
         url, "--tokenizer", str(bundled_tokenizer_path()), "--max-new-tokens", "24",
         "--display", "plain"], capture_output=True, text=True, timeout=600,
        env=scheduler_free(dict(os.environ)))
    assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.mark.skipif(not SLURM_CONF, reason="set EAGLE_SLURM_CONF to the slurm.conf of a running "
                    "cluster (scripts/slurm/slurm.sh start DIR)")
def test_the_documented_array_requeued_mid_run_exports_like_one_batch(tmp_path: Path,
                                                                      server: str) -> None:
    assert SLURM_CONF and shutil.which("sbatch"), "sbatch is not on PATH"
    slurm = RealSlurm(SLURM_CONF)
    slurm.env = scheduler_free(slurm.env) | {"SLURM_CONF": SLURM_CONF}
    prompts = write_prompts(tmp_path / "prompts.jsonl", PROMPTS)
    runs = tmp_path / "runs"
    script = tmp_path / "capture.sbatch"
    script.write_text(with_site_values(doc_block("### An `sbatch` script", "bash"), {
        "--array=0-15": "--array=0-3",
        "--cpus-per-task=4": "--cpus-per-task=1",        # the test cluster has 2 CPUs
        "exec eagle-tui capture": f"exec {EAGLE_TUI} capture",
        "/shared/prompts.jsonl": str(prompts),
        "/shared/kimi-tokenizer": str(bundled_tokenizer_path()),
        "http://router:30000": server,
        "/shared/runs/kimi": str(runs),
        "--grace 20": "--grace 20 --max-new-tokens 24 --concurrency 2 --shard-rows 5",
    }), encoding="utf-8")
    (tmp_path / "logs").mkdir()
    job = slurm.run("sbatch", "--parsable", f"--chdir={tmp_path}", str(script))
    slices = [runs / f"slice-{task}" for task in range(4)]
    try:
        wait_until(rows_stored(slices[1], 10), 180, "array task 1 to store 10 rows")
        slurm.run("scontrol", "requeue", f"{job}_1")
        wait_until(lambda: slurm.state(f"{job}_1") == "PENDING", 60, what="task 1 requeued")
        requeued = followed(slurm, job, runs)["tasks"][1]
        assert (requeued["state"], requeued["reason"], requeued["slice"]) == (
            "PENDING", "BeginTime", "1/4") and requeued["rows"] >= 10
        slurm.run("scontrol", "update", f"jobid={job}_1", "StartTime=now")
        wait_until(lambda: slurm.state(job) == "GONE", 600, what=f"array {job} to finish")
    finally:
        subprocess.run(["scancel", job], env=slurm.env, capture_output=True, timeout=60)
    logs = [tmp_path / "logs" / f"capture-{job}_{task}.log" for task in range(4)]

    whole = one_batch(prompts, tmp_path / "whole", server)
    stored = [assert_only_valid_shards(path) for path in slices]
    assert all(set(counts.values()) == {1} for counts in stored), "no row twice in a slice"
    assert sum(stored, Counter()) == assert_only_valid_shards(whole), "no row lost, none twice"
    assert exported(slices, tmp_path / "four.jsonl") == exported([whole],
                                                                 tmp_path / "one.jsonl")

    node = slurm.node()
    for task, path in enumerate(slices):
        manifest = Manifest.load(path)
        assert manifest.extra.partition == f"{task}/4" and manifest.extra.state == "finished"
        restarts = [run.restart_count for run in manifest.extra.scheduler_runs]
        assert restarts == ([0, 1] if task == 1 else [0]), (task, restarts)
        assert {(run.job_id, run.task_id, run.node) for run in manifest.extra.scheduler_runs} \
            == {(job, str(task), node)}
        text = logs[task].read_text(encoding="utf-8")
        assert text.count("capture finished") == 1, text[-2000:]
    task_1 = logs[1].read_text(encoding="utf-8")
    assert "DUE TO JOB REQUEUE" in task_1 and "SIGTERM: stopping" in task_1
    assert f"slice 1/4 from slurm job {job} task 1 on node {node}, restart 1" in task_1
    assert "capture stopped" in task_1

    ended = followed(slurm, job, runs)      # squeue still holds the ended tasks (MinJobAge)
    assert (ended["slices"], ended["done"], ended["failed"], ended["requeues"]) == (4, 4, 0, 1)
    assert ended["rows"] == sum(sum(counts.values()) for counts in stored)
    assert [task["state"] for task in ended["tasks"]] == ["COMPLETED"] * 4


def followed(slurm: RealSlurm, job: str, runs: Path) -> dict[str, Any]:
    """``eagle-tui batches --slurm-job JOB --runs RUNS --json``, as a head node runs it."""
    done = subprocess.run([str(EAGLE_TUI), "batches", "--slurm-job", job, "--runs", str(runs),
                           "--json"], capture_output=True, text=True, env=slurm.env, timeout=60)
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def test_the_documented_indexed_job_captures_its_index_and_resumes(tmp_path: Path,
                                                                    server: str) -> None:
    manifest = yaml.safe_load(doc_block("### A Kubernetes Indexed Job", "yaml"))
    spec = manifest["spec"]
    container = spec["template"]["spec"]["containers"][0]
    command = " ".join(container["args"])
    completions = spec["completions"]
    assert f"--shard auto/{completions}" in command and spec["completionMode"] == "Indexed"
    grace = float(re.search(r"--grace (\S+)", command)[1])  # type: ignore[index]
    assert grace < spec["template"]["spec"]["terminationGracePeriodSeconds"]
    downward = {env["name"]: env["valueFrom"]["fieldRef"]["fieldPath"]
                for env in container["env"]}
    assert downward == {"JOB_NAME": "metadata.labels['batch.kubernetes.io/job-name']",
                        "NODE_NAME": "spec.nodeName"}

    prompts = write_prompts(tmp_path / "prompts.jsonl", 160)
    data = tmp_path / "data"
    shell = with_site_values(command, {
        "exec eagle-tui capture": f"exec {EAGLE_TUI} capture",
        "/data/prompts.jsonl": str(prompts), "/data/kimi-tokenizer":
        str(bundled_tokenizer_path()), "http://sglang-router:30000": server,
        "/data/runs": str(data / "runs"),
        "--grace 30": "--grace 5 --max-new-tokens 24",
    })
    pod = scheduler_free(dict(os.environ)) | {
        "JOB_COMPLETION_INDEX": "3", "JOB_NAME": "eagle-capture", "NODE_NAME": "gpu-node-7",
        "HOSTNAME": "eagle-capture-3-x7k2p"}
    first = subprocess.run([*container["command"], shell], capture_output=True, text=True,
                           env=pod, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    out = data / "runs" / "kimi" / "slice-3"
    rows = assert_only_valid_shards(out)
    assert rows and set(rows.values()) == {1}
    retry = subprocess.run([*container["command"], shell], capture_output=True, text=True,
                           env=pod | {"NODE_NAME": "gpu-node-9"}, timeout=300)
    assert retry.returncode == 0, retry.stderr[-2000:]   # a pod retry: resumed, nothing to do
    assert assert_only_valid_shards(out) == rows
    runs = Manifest.load(out).extra.scheduler_runs
    assert [(run.shard, run.scheduler, run.job_id, run.task_id, run.node) for run in runs] == [
        (f"3/{completions}", "kubernetes", "eagle-capture", "3", "gpu-node-7"),
        (f"3/{completions}", "kubernetes", "eagle-capture", "3", "gpu-node-9")]

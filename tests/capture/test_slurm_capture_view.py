"""The Capture view follows a Slurm array as one job (``eagle-tui --slurm-job ID --runs DIR``,
issue 22 item 4): a fake ``squeue`` executable on PATH (a real process printing what a real
Slurm printed, tests/fixtures/slurm) and a real slice directory written by ``capture --shard
auto`` under task 1's recorded environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.slurm import FIXTURES
from support.waiting import pilot_wait
from test_engine_fakes import write_prompts
from test_shard_auto import TASK_1, capture_args, run_task

from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.options import DashboardOptions
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.slurm import SlurmFollower
from eagle_tui.tui.widgets.slurm_job import SlurmJobPanel

pytestmark = pytest.mark.slow


def fake_squeue(bin_dir: Path, fixture: str) -> None:
    """``squeue`` on PATH printing ``fixture``'s output (its first line is the command)."""
    printed = (FIXTURES / fixture).read_text(encoding="utf-8").split("\n", 1)[1]
    bin_dir.mkdir()
    (bin_dir / "printed.txt").write_text(printed, encoding="utf-8")
    script = bin_dir / "squeue"
    script.write_text(f"#!/bin/sh\ncat '{bin_dir / 'printed.txt'}'\n", encoding="utf-8")
    script.chmod(0o755)


async def test_the_capture_view_shows_the_array_as_one_job(
        tmp_path: Path, sim_server: SimProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", 40)
    runs = tmp_path / "runs"
    out = runs / "slice-1"
    done = run_task(capture_args(prompts, out, sim_server.url, "--shard", "auto"), TASK_1)
    assert done.returncode == 0, done.stderr[-2000:]
    fake_squeue(tmp_path / "bin", "squeue-running-format.txt")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")

    follower = SlurmFollower("1", [runs])
    app = EagleApp(DashboardOptions(start_view="capture", slurm_job="1", slurm_runs=(runs,)),
                   sources=Sources(slurm=follower))
    async with app.run_test(size=(120, 40)) as pilot:
        panel = app.screen.query_one(SlurmJobPanel)
        await pilot_wait(pilot, lambda: follower.latest().progress is not None, what="a look")
        app.screen.refresh_batches()  # type: ignore[attr-defined]
        await pilot.pause()
        look = follower.latest()
        assert look.error is None and look.progress is not None
        rows = look.progress.view.rows
        assert 0 < rows <= 40 and look.progress.total == 40  # 40 records x 1 preset
        title = str(panel.query_one(".slurm-title").render())
        assert title == ("slurm job 1 · 4 slices: 0 done, 2 running, 2 pending, 0 failed · "
                         "0 requeues")
        tasks = str(panel.query_one(".slurm-tasks").render()).splitlines()
        assert [line.split()[:2] for line in tasks] == [
            ["0", "RUNNING"], ["1", "RUNNING"], ["2", "PENDING"], ["3", "PENDING"]]
        assert f"{rows:,} rows" in tasks[1] and "1/4" in tasks[1]
        meter = panel.query_one(".slurm-progress").value  # type: ignore[attr-defined]
        assert meter.label.startswith(f"{rows}/40 rows ({rows / 40:.0%})")

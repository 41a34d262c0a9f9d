"""A full disk (issue 12): the capture stops with one clean line, leaves no ``.tmp`` file, keeps
the manifest consistent, and ``--resume`` finishes the batch once space is back.

Two ways, both used here:

- a real small file system: a tmpfs of a few KB to tens of KB mounted for the output
  directory (needs root and permission to mount; skipped otherwise), the real ``capture``
  CLI against the simulated server, each size filling the disk at another point (the
  first manifest, a shard's row groups, its footer, the manifest listing it, rejects.jsonl,
  capture.log); then the file system is enlarged (``mount -o remount``) and the batch
  resumed;
- ENOSPC injected in process at every write point: every file the batch writes goes
  through a wrapper that fails once a byte budget is spent, and the budget is swept over
  the whole run, so each write (manifest, shard temp file, rejects, failures, a retry of
  the same write while cleaning up) is the one that fails in some run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.crashresume import assert_only_valid_shards
from support.diskfull import DiskBudget, inject_full_disk
from test_e2e_support import run_cli
from test_engine_fakes import FakeSGLang, bundled_tokenizer, capture, make_config, write_prompts

from eagle_tui.core import fsio
from eagle_tui.core.capture import failures, rejects
from eagle_tui.core.errors import EagleError, OutputWriteError
from eagle_tui.core.shards.batchdir.scan import scan_completed
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.sim.launcher import SimProcess
from eagle_tui.core.tokenizer import bundled_tokenizer_path

PROMPTS = 300
BAD_EVERY = 37  # some rejects, so rejects.jsonl is written too


def _mount(point: Path, size: str) -> None:
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                    str(point)], check=True, capture_output=True)


def _umount(point: Path) -> None:
    """Unmount, lazily if something still has a file open there: a mount left behind makes
    pytest's later clean-up of old temp directories fail (EBUSY), ending a green run red."""
    if subprocess.run(["umount", str(point)], check=False, capture_output=True).returncode:
        subprocess.run(["umount", "-l", str(point)], check=True, capture_output=True)


@pytest.fixture
def small_fs(tmp_path: Path) -> Any:
    """``mount(size)`` -> a fresh tmpfs of that size; unmounted at the end."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        point = tmp_path / f"fs-{len(mounted)}"
        point.mkdir()
        try:
            _mount(point, size)
        except (subprocess.CalledProcessError, FileNotFoundError, PermissionError) as e:
            pytest.skip(f"cannot mount a small tmpfs here ({e}); the injected test covers it")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        _umount(point)


def _no_temp_files(out: Path) -> None:
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")], list(out.rglob("*"))


def _consistent(out: Path) -> int:
    """Every listed shard is intact; returns the rows the manifest lists."""
    if not (out / "manifest.json").exists():
        return 0
    scan = scan_completed(out)
    assert not [f for f in scan.ignored if f.listed], scan.ignored
    manifest = Manifest.load(out)
    assert manifest.counts.done == sum(s.rows for s in manifest.shards)
    return manifest.counts.done


@pytest.mark.slow
@pytest.mark.parametrize("size", ["4k", "12k", "24k", "40k", "64k", "96k"])
def test_a_full_small_file_system_stops_cleanly_and_resume_finishes(
        tmp_path: Path, small_fs: Any, sim_server: SimProcess, size: str) -> None:
    prompts = write_prompts(tmp_path / "prompts.jsonl", PROMPTS, bad_every=BAD_EVERY)
    point = small_fs(size)
    out = point / "out"
    args = ["--prompts", str(prompts), "--out", str(out), "--server", sim_server.url,
            "--tokenizer", str(bundled_tokenizer_path()), "--max-new-tokens", "48",
            "--shard-rows", "25", "--concurrency", "8"]
    full = run_cli(*args)
    assert full.returncode in (2, 3), full.stderr[-2000:]  # refused to start / crashed
    assert "Traceback" not in full.stderr and "disk full (ENOSPC)" in full.stderr
    errors = [line for line in full.stderr.splitlines()
              if line.startswith(("eagle-tui capture:", "ERROR:"))]
    assert errors and all("disk full" in line for line in errors), full.stderr[-2000:]
    _no_temp_files(out)
    saved = _consistent(out)

    subprocess.run(["mount", "-o", "remount,size=64m", str(point)], check=True)
    done = run_cli(*args, *(["--resume"] if (out / "manifest.json").exists() else []))
    assert done.returncode == 1, done.stderr[-2000:]  # finished; the bad lines are rejected
    counts = assert_only_valid_shards(out)
    good = PROMPTS - PROMPTS // BAD_EVERY
    assert len(counts) == good and set(counts.values()) == {1}
    assert saved <= good
    _no_temp_files(out)
    rejected = (out / "rejects.jsonl").read_text().splitlines()
    assert len({json.loads(x)["line"] for x in rejected}) == PROMPTS // BAD_EVERY


def _inject(monkeypatch: pytest.MonkeyPatch, budget: DiskBudget) -> None:
    # manifest, shards, registry; rejects; failures
    inject_full_disk(monkeypatch, budget, fsio, rejects, failures)


@pytest.mark.slow  # builds things: 81 whole captures, sweeping the byte budget
async def test_enospc_injected_at_every_write_point(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_prompts(tmp_path / "prompts.jsonl", 120, bad_every=23)
    fake = FakeSGLang()
    fake.fault_for = lambda prompt: "ctx" if sum(prompt) % 29 == 0 else None  # failures too
    # How many bytes a whole run writes, to sweep the budget over it.
    whole = DiskBudget(1 << 40)
    _inject(monkeypatch, whole)
    reference = tmp_path / "reference"
    await capture(make_config(tmp_path, [fake.url], out_dir=reference, shard_rows=20),
                  [fake], bundled_tokenizer())
    total = whole.used
    shutil.rmtree(reference)

    steps = 40
    outcomes: set[str] = set()
    for step in range(steps):
        out = tmp_path / f"out-{step}"
        budget = DiskBudget(total * step // steps)
        _inject(monkeypatch, budget)
        config = make_config(tmp_path, [fake.url], out_dir=out, shard_rows=20)
        try:
            summary = await capture(config, [fake], bundled_tokenizer())
        except OutputWriteError as e:  # before anything was sent: refused to start
            assert "disk full (ENOSPC)" in str(e)
            outcomes.add("refused")
        except EagleError as e:
            assert "disk full" in str(e) or "cannot write" in str(e), e
            outcomes.add("refused")
        else:
            assert budget.hits, f"step {step}: the budget was never reached"
            assert summary.state == "failed" and summary.exit_code == 3
            assert summary.reason is not None and "disk full (ENOSPC)" in summary.reason
            outcomes.add("stopped")
        _no_temp_files(out)
        _consistent(out)

        # Space is back: the batch finishes, every good row stored once.
        _inject(monkeypatch, DiskBudget(1 << 40))
        resumed = make_config(tmp_path, [fake.url], out_dir=out, shard_rows=20,
                              resume=(out / "manifest.json").exists())
        final = await capture(resumed, [fake], bundled_tokenizer())
        assert final.state == "finished", (step, final.reason)
        counts = assert_only_valid_shards(out)
        assert set(counts.values()) == {1}
        assert len(counts) + final.progress.counts.failed + 120 // 23 == 120, step
    assert outcomes == {"refused", "stopped"}

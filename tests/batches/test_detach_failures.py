"""A detached batch that cannot start says why, in the launcher, with exit status."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from batch_helpers import batch_config, write_prompts

from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.batches.survey import survey
from eagle_tui.core.sampling import SamplingIdentity, SamplingPreset
from eagle_tui.core.shards.batchdir.lock import OutputLock
from eagle_tui.core.shards.manifest import BatchConfig, Manifest
from eagle_tui.tui.cli.batch_verbs import EXIT_LOCKED, EXIT_START_FAILED, run_detached


@pytest.mark.slow  # starts a real detached worker process
async def test_a_batch_that_cannot_start_reports_why(tmp_path: Path, registry: Registry) -> None:
    write_prompts(tmp_path / "prompts.jsonl", 3)
    config = batch_config(tmp_path, "http://127.0.0.1:9")
    Manifest(config.out_dir, BatchConfig("p", "x", "t", "f", "h",
                                         SamplingIdentity(64, (SamplingPreset(),)))).save_atomic()
    err = io.StringIO()
    # Runs in the worker: the directory already holds a batch and --resume was not given.
    assert run_detached(config, name="clash", out=io.StringIO(), err=err) == EXIT_START_FAILED
    assert "pass --resume" in err.getvalue() and "worker.log" in err.getvalue()
    view = await survey(registry.find("clash"))
    assert view.state == "failed" and "--resume" in (view.detail or "")


def test_a_held_directory_is_refused_before_starting_anything(
    tmp_path: Path, registry: Registry
) -> None:
    config = batch_config(tmp_path, "http://127.0.0.1:9")
    err = io.StringIO()
    with OutputLock(config.out_dir).acquire(batch_id="other"):
        assert run_detached(config, out=io.StringIO(), err=err) == EXIT_LOCKED
    assert "batch other" in err.getvalue() and "choose another --out" in err.getvalue()
    assert registry.all() == []

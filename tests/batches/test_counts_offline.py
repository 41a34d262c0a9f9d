"""Counts of a batch whose worker is gone add up (issue 12): ``batches`` showed
``done 700/400`` after three kills and resumes, adding the last run's "done before" to the
manifest's total over every run."""

from __future__ import annotations

import time
from pathlib import Path

from support.records import stored_config

from eagle_tui.core.batches.registry import BatchRecord
from eagle_tui.core.batches.survey import survey
from eagle_tui.core.capture.progress import Progress
from eagle_tui.core.sampling import SamplingIdentity, SamplingPreset
from eagle_tui.core.shards.manifest import BatchConfig, Manifest, ShardInfo
from eagle_tui.tui.cli.batch_table import details, rows_done, table

CONFIG = BatchConfig(prompt_file="p", prompt_sha256="0", tokenizer_path="t",
                     tokenizer_fingerprint="f", template_hash="h",
                     sampling=SamplingIdentity(64, (SamplingPreset(),)))


async def test_offline_counts_never_count_earlier_runs_twice(tmp_path: Path) -> None:
    out = tmp_path / "out"
    manifest = Manifest(out, CONFIG)
    for i in range(4):  # 400 rows over four runs
        manifest.add_shard(ShardInfo(f"part-{i:05d}.parquet", 100, "0", 1, 0, "a", "b"))
    manifest.counts.failed, manifest.counts.rejected = 0, 0
    manifest.extra.presets = [""]
    manifest.save_atomic()
    # What the killed fourth run had saved: 300 found done, 100 done by itself.
    last = Progress(total=400, already_done=300, done=100, written=100, failed=0, rejected=0,
                    settled=400, remaining=0)
    record = BatchRecord(id="b", name="kills", out_dir=str(out), socket=str(out / "c.sock"),
                         log=str(out / "w.log"), config=stored_config(out),
                         created_at=time.time(), pid=1,
                         launched_at=time.time() - 3600, runs=4, last_progress=last)
    view = await survey(record)
    assert view.state == "interrupted"
    assert view.progress is not None
    assert rows_done(view.progress) == 400 and view.progress.total == 400
    assert view.progress.settled == 400 and view.progress.remaining == 0
    assert "400/400" in table([view]) and "rows      400 of 400" in details(view)

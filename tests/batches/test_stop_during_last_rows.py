"""A detached batch stopped while its last rows are in flight (issue 39 item 6): they finish
while it drains, so it is done (the `stop` verb says so, `batches` shows it, the manifest
records it), not stopped until a resume that has nothing to do. A real worker against the
simulated server, stopped with the verb a person types."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from batch_helpers import batch_config, wait_lock_free, write_prompts

from eagle_tui.core.batches.control_client import BatchClient
from eagle_tui.core.batches.detach import launch_detached
from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.batches.survey import survey
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.tui.cli.main import main as cli_main

pytestmark = pytest.mark.slow


async def test_a_stop_during_the_last_rows_ends_the_batch_done(
        tmp_path: Path, registry: Registry, start_sim: Any,
        capsys: pytest.CaptureFixture[str]) -> None:
    sim = start_sim("--tokens-per-s", "20")  # 32 tokens: about 1.6 s per answer
    write_prompts(tmp_path / "prompts.jsonl", 4)
    config = batch_config(tmp_path, sim.url, max_new_tokens=32, concurrency=4)
    record = (await asyncio.to_thread(launch_detached, config)).record
    async with BatchClient(record.socket) as client:
        for _ in range(600):  # every row in flight: the next thing to happen is the last row
            status = await client.status()
            if status.progress.in_flight == 4 and status.progress.total == 4:
                break
            await asyncio.sleep(0.01)
        assert status.progress.in_flight == 4 and status.progress.done == 0
    code = await asyncio.to_thread(cli_main, ["stop", record.id])
    said = capsys.readouterr().out
    assert code == 0
    assert f"batch {record.id} done: 4 rows captured" in said and "resume" not in said.replace(
        "nothing is left to resume", "")
    assert await asyncio.to_thread(wait_lock_free, Path(record.out_dir))  # the worker exited
    view = await survey(Registry().load(record.id))
    assert view.state == "done"
    assert Manifest.load(record.out_dir).extra.state == "finished"
    assert await asyncio.to_thread(cli_main, ["resume", record.id]) == 5  # nothing to resume

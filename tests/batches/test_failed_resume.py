"""Issue 20 item 15: a resume that cannot start (the prompt file is gone) says why and leaves
the batch as it was: a stopped batch stays ``stopped`` with its rows and total, never
``failed 16/?``. Real processes: a detached worker against the simulated server."""

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
from eagle_tui.tui.cli import main as cli_main
from eagle_tui.tui.cli.batch_table import table_row

pytestmark = pytest.mark.slow


async def test_a_resume_that_cannot_start_keeps_the_batch_stopped(
    tmp_path: Path, registry: Registry, start_sim: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = start_sim("--tokens-per-s", "50")
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts, 60)
    config = batch_config(tmp_path, sim.url, max_new_tokens=32, concurrency=4)
    record = (await asyncio.to_thread(launch_detached, config, name="night")).record
    async with BatchClient(record.socket) as client:
        while (await client.status()).progress.done < 4:
            await asyncio.sleep(0.1)  # the worker's own progress: a condition, polled
    assert await asyncio.to_thread(cli_main, ["stop", record.id]) == 0
    assert await asyncio.to_thread(wait_lock_free, Path(record.out_dir))
    before = await survey(Registry().load(record.id))
    assert before.state == "stopped" and before.progress is not None
    capsys.readouterr()

    prompts.unlink()  # moved away since
    code = await asyncio.to_thread(cli_main, ["resume", record.id])
    err = capsys.readouterr().err
    assert code != 0 and str(prompts) in err

    after = await survey(Registry().load(record.id))
    assert after.state == "stopped", after.detail
    assert after.progress is not None and after.progress.total == before.progress.total
    assert table_row(after)[2:4] == table_row(before)[2:4]  # state and rows/total as before
    assert "?" not in table_row(after)[3]
    assert "resume failed" in (after.detail or "") and str(prompts) in (after.detail or "")

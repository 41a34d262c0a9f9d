"""A finished detached batch in the Capture view (issue 39 item 6): its servers line names the
servers it was sent to (no worker runs: not "no server status yet"), and its tokens are what
its shards hold over every run, also after a resume that had nothing left to capture (its
worker counted 0 tokens in a few seconds). A real worker against the simulated server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from support.waiting import async_wait_until
from tui_fakes import wait_for

from eagle_tui.core.batches.detach import launch_detached
from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.shards.reader import ShardReader
from eagle_tui.core.tokenizer import bundled_tokenizer_path
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.cli.main import main as cli_main
from eagle_tui.tui.options import DashboardOptions
from eagle_tui.tui.screens.capture import CaptureScreen
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.batches import DetachedCapture
from eagle_tui.tui.sources.capture import BatchRequest
from eagle_tui.tui.sources.tokenizers import TokenizerCache
from eagle_tui.tui.widgets.batch_detail import BatchDetail


def prompts_file(path: Path, count: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"p{i}", "messages": [
        {"role": "user", "content": f"question {i}"}]}) + "\n" for i in range(count)))
    return path


def output_tokens(out_dir: Path) -> int:
    reader = ShardReader(out_dir)
    try:
        return sum(len(row["input_ids"]) - row["prompt_len"]
                   for row in reader.iter_rows(["input_ids", "prompt_len"]))
    finally:
        reader.close()


async def until_done(batch_id: str) -> None:
    await async_wait_until(lambda: Registry().load(batch_id).final_state == BatchState.DONE,
                           120, "the batch done")


async def detail_lines(batch_id: str) -> tuple[str, str]:
    """(counts line, servers line) of the batch in a freshly opened Capture view."""
    app = EagleApp(DashboardOptions(start_view="capture"),  # type: ignore[call-arg]
                   sources=Sources(capture=DetachedCapture(), tokenizers=TokenizerCache()))
    async with app.run_test(size=(160, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, CaptureScreen)
        detail = screen.query_one(BatchDetail)

        def counts() -> str:
            return str(detail.query_one(".batch-counts").render())

        await wait_for(pilot, lambda: screen.selected() is not None
                       and screen.selected().batch_id == batch_id  # type: ignore[union-attr]
                       and "stored" in counts(), 60, "the batch's counts from its shards")
        return counts(), str(detail.query_one(".batch-servers").render())


async def test_a_finished_batch_shows_its_servers_and_every_runs_tokens(
        tmp_path: Path, sim_server) -> None:  # type: ignore[no-untyped-def]
    request = BatchRequest(prompts_file(tmp_path / "p.jsonl", 12), tmp_path / "out",
                           (sim_server.url,), bundled_tokenizer_path(), concurrency=4,
                           max_new_tokens=64)
    batch_id = (await asyncio.to_thread(launch_detached, request.to_config())).record.id
    await until_done(batch_id)
    tokens = output_tokens(tmp_path / "out")
    assert tokens > 12
    counts, servers = await detail_lines(batch_id)
    assert f"{tokens:,} output tokens stored" in counts and "tokens in" not in counts
    assert servers.startswith(f"servers {sim_server.url} · no worker runs (done)")
    assert "no server status yet" not in servers

    # As a stop during the last row left it before: stopped, every row captured; the
    # resume then has nothing to do, and its worker counts 0 tokens.
    Registry().update(batch_id, final_state=BatchState.STOPPED)
    assert await asyncio.to_thread(cli_main, ["resume", batch_id]) == 0
    await until_done(batch_id)
    last_run = Registry().load(batch_id).last_progress
    assert last_run is not None and last_run.output_tokens == 0
    counts, _ = await detail_lines(batch_id)
    assert f"{tokens:,} output tokens stored" in counts

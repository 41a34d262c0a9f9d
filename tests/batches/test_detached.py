"""Detached batches as real processes against the simulated server: they outlive their
launcher, obey pause/resume/stop, survive SIGKILL via resume exactly-once, and stream the
exact token ids of watched requests."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import psutil
import pytest
from batch_helpers import EventLog, batch_config, progress_where, wait_lock_free, write_prompts

from eagle_tui.core import kimi
from eagle_tui.core.batches.control_client import BatchClient
from eagle_tui.core.batches.detach import launch_detached
from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.batches.survey import survey
from eagle_tui.core.capture.config import config_to_json
from eagle_tui.core.errors import BatchLocked
from eagle_tui.core.shards.batchdir.lock import OutputLock, is_held
from eagle_tui.core.shards.batchdir.scan import scan_completed
from eagle_tui.core.shards.manifest import Manifest
from eagle_tui.core.shards.reader import ShardReader
from eagle_tui.tui.cli import main as cli_main

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SLOW = ("--tokens-per-s", "50")  # ~0.6 s per 32-token request: slow enough to act mid-batch

_LAUNCH = """
import sys
from eagle_tui.core.capture.config import config_from_json
from eagle_tui.tui.cli.batch_verbs import run_detached
sys.exit(run_detached(config_from_json(sys.argv[1]), name=sys.argv[2]))
"""


def rows_of(out_dir: Path) -> list[dict[str, Any]]:
    reader = ShardReader(out_dir)
    try:
        return list(reader.iter_rows())
    finally:
        reader.close()


async def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """Run an eagle-tui verb (it runs its own event loop, hence the thread)."""
    code = await asyncio.to_thread(cli_main, list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


async def test_detached_batch_outlives_its_launcher_and_obeys_pause_resume_stop(
    tmp_path: Path, registry: Registry, start_sim: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = start_sim(*SLOW)
    write_prompts(tmp_path / "prompts.jsonl", 80)
    config = batch_config(tmp_path, sim.url, max_new_tokens=32, concurrency=4)

    # Started by a process that exits right away, like a shell that is then closed.
    launcher = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _LAUNCH, config_to_json(config).decode(), "night-run",
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(launcher.communicate(), 120)
    assert launcher.returncode == 0, err.decode()
    assert "started" in out.decode()

    record = Registry().find("night-run")  # found afresh, as a new dashboard would
    assert record.pid is not None
    worker = psutil.Process(record.pid)
    # Not the launcher's child, not in our session: a hang-up of this terminal cannot
    # reach it.
    assert worker.ppid() != launcher.pid and os.getsid(worker.pid) != os.getsid(0)
    os.kill(record.pid, signal.SIGHUP)  # the terminal hanging up does not end it

    async with BatchClient(record.socket) as client:
        log = EventLog(client.events())
        assert (await log.next()).type == "hello"
        status = await client.status()
        assert status.batch.id == record.id and status.state == "running"
        first = status.progress.done
        await log.until(progress_where(lambda p: p.done > first and p.in_flight > 0))
        assert worker.is_running()

        # Pause: nothing new goes out, what was in flight finishes.
        code, said = await cli(capsys, "pause", "night-run")
        assert code == 0 and "paused" in said
        paused = await client.status()
        sent, busy = paused.servers[0].sent, paused.progress.in_flight
        await log.until(progress_where(lambda p: p.in_flight == 0))
        for _ in range(4):  # a second of snapshots with nothing in flight
            await log.until(lambda e: e.type == "progress")
        calm = await client.status()
        assert calm.state == "paused" and calm.servers[0].sent == sent
        assert calm.progress.done + calm.progress.failed == (
            paused.progress.done + paused.progress.failed + busy)

        # Only one controller of a batch directory.
        with pytest.raises(BatchLocked, match=f"pid {record.pid}"):
            OutputLock(Path(record.out_dir)).acquire(retry_s=0)
        with pytest.raises(BatchLocked, match="already being captured"):
            launch_detached(config)

        code, said = await cli(capsys, "resume", record.id)
        assert code == 0 and "running" in said
        await log.until(lambda e: e.type == "request" and e.data.kind == "sent")

        # Stop: in-flight requests drain, everything lands in complete shards.
        await log.until(progress_where(lambda p: p.in_flight > 0))
        code, said = await cli(capsys, "stop", record.id)  # returns once the worker ended
        assert code == 0 and "stopped" in said
        end = await log.until(lambda e: e.type == "end")

    assert end.data.state == "stopped" and end.data.progress.interrupted == 0
    done = end.data.progress.done
    assert 0 < done < 80
    assert await asyncio.to_thread(wait_lock_free, Path(record.out_dir))
    manifest = Manifest.load(record.out_dir)
    assert manifest.extra.state == "stopped" and manifest.counts.done == done
    assert len(rows_of(Path(record.out_dir))) == done
    assert not scan_completed(record.out_dir).ignored  # no torn or unlisted shard files
    assert not Path(record.socket).exists()
    assert (await survey(Registry().load(record.id))).state == "stopped"


async def test_killed_worker_is_interrupted_and_resume_completes_it_exactly_once(
    tmp_path: Path, registry: Registry, start_sim: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = start_sim(*SLOW)
    ids = write_prompts(tmp_path / "prompts.jsonl", 28)
    # Shards commit every half second, so the kill finds some rows safe and some not.
    config = batch_config(tmp_path, sim.url, max_new_tokens=32, concurrency=4,
                          shard_max_age_s=0.5)
    record = (await asyncio.to_thread(launch_detached, config, name="fragile")).record
    out_dir = Path(record.out_dir)

    async with BatchClient(record.socket) as client:
        log = EventLog(client.events(reconnect_s=120))
        await log.until(progress_where(lambda p: p.written >= 4 and p.in_flight > 0))
        assert record.pid is not None
        os.kill(record.pid, signal.SIGKILL)
        await log.until(lambda e: e.type == "disconnected")
        assert await asyncio.to_thread(wait_lock_free, out_dir)

        code, listing = await cli(capsys, "batches")
        assert code == 0 and "interrupted" in listing and "fragile" in listing
        code, said = await cli(capsys, "resume", "fragile")
        assert code == 0 and "started" in said, said

        # The same client follows the new worker.
        hello = await log.until(lambda e: e.type == "hello")
        assert hello.data.batch.runs == 2
        end = await log.until(lambda e: e.type == "end", timeout=120)

    assert end.data.state == "done"
    stored = [row["sample_id"] for row in rows_of(out_dir)]
    assert sorted(stored) == ids  # every prompt once: none lost, none twice
    assert Manifest.load(out_dir).extra.state == "finished"
    assert await asyncio.to_thread(wait_lock_free, out_dir) and not is_held(out_dir)
    code, listing = await cli(capsys, "batches", "fragile")
    assert code == 0 and "done" in listing


async def test_watched_requests_stream_exactly_the_stored_ids(
    tmp_path: Path, registry: Registry, sim_server: Any
) -> None:
    write_prompts(tmp_path / "prompts.jsonl", 240, tools_every=2)
    config = batch_config(tmp_path, sim_server.url, max_new_tokens=1024, concurrency=8,
                          shard_rows=64)
    record = (await asyncio.to_thread(launch_detached, config)).record
    async with BatchClient(record.socket) as client:
        log = EventLog(client.events())
        await log.next()
        await client.watch(12)
        await log.until(lambda e: e.type == "end")

    assert not log.of("lost")
    watched = {e.data.rid: e.data.sample_id for e in log.of("request", kind="sent")
               if e.data.watched}
    streamed: dict[str, list[int]] = defaultdict(list)
    for event in log.of("delta"):
        streamed[event.data.rid].extend(event.data.new_ids)
    assert set(streamed) <= set(watched)  # only watched requests stream
    rows = {row["sample_id"]: row for row in rows_of(Path(record.out_dir))}
    finished = {e.data.sample_id: e.data.rid for e in log.of("request", kind="finished")}
    compared = [sid for sid, rid in finished.items() if rid in watched]
    assert len(compared) == 12
    outputs = []
    for sample_id in compared:
        row = rows[sample_id]
        output = row["input_ids"][row["prompt_len"]:]
        assert streamed[finished[sample_id]] == output  # token for token, nothing re-parsed
        assert row["input_ids"][row["prompt_len"] - 1] == kimi.THINK
        if row["finish_reason"] == "stop":  # (the sim lets 1 in 12 run to the length limit)
            assert kimi.THINK_END in output and output[-1] == kimi.IM_END
        outputs.append(set(output))
    assert any(kimi.THINK_END in ids for ids in outputs)
    assert any(kimi.TOOL_CALL_IDS & ids for ids in outputs)

"""A reader that stops early (`eagle-tui batches | head -4`, `resume … | head -1`): every
verb ends quietly with 141 (128 + SIGPIPE), never a BrokenPipeError traceback (issue 39
item 5). The pipes are real: their read end is closed before the verb writes, which is
what `head` does once it has its lines, every time instead of 2 runs in 6."""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from batch_helpers import batch_config, write_prompts
from support.records import stored_config
from support.terminal import PtyTerminal, eagle_tui_command
from test_inspect_cli import batch, tokenizer  # noqa: F401  (fixtures: a captured batch)

from eagle_tui.core.batches.detach import launch_detached
from eagle_tui.core.batches.registry import BatchRecord, Registry
from eagle_tui.core.batchstate import BatchState
from eagle_tui.tui.cli.main import VERBS

pytestmark = pytest.mark.slow

CLOSED = 141
SLOW = ("--tokens-per-s", "20")


def into_closed_pipe(*argv: str) -> tuple[int, str]:
    """``eagle-tui ARGV`` writing to a pipe nobody reads any more; (status, stderr)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone, as head has after its lines
    try:
        done = subprocess.run([eagle_tui_command(), *argv], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    return done.returncode, done.stderr


def assert_quiet(status: int, stderr: str, *, allowed: tuple[int, ...] = (CLOSED,)) -> None:
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert "Exception ignored" not in stderr and "Errno 32" not in stderr, stderr
    assert status in allowed, (status, stderr)


def plant(registry: Registry, count: int, tmp_path: Path) -> list[BatchRecord]:
    records = []
    for i in range(count):
        out_dir = tmp_path / f"out-{i}"
        record = BatchRecord(id=f"20260101-0000{i:02d}-done", name=f"night-{i}",
                             out_dir=str(out_dir), socket=str(out_dir / "control.sock"),
                             log=str(out_dir / "worker.log"), config=stored_config(out_dir),
                             created_at=time.time(), final_state=BatchState.DONE)
        registry.save(record)
        records.append(record)
    return records


@pytest.mark.parametrize("verb", [None, *VERBS])
def test_every_verbs_help_into_a_closed_pipe_ends_quietly(verb: str | None,
                                                         registry: Registry) -> None:
    # argparse ignores a failed write of its help (and exits 0); what it left buffered
    # fails at our last flush (141)
    assert_quiet(*into_closed_pipe(*([verb] if verb else []), "--help"), allowed=(0, CLOSED))


@pytest.mark.parametrize("argv", [("batches",), ("batches", "--json"),
                                  ("batches", "20260101-000001-done")])
def test_batches_into_a_closed_pipe_ends_quietly(argv: tuple[str, ...], registry: Registry,
                                                 tmp_path: Path) -> None:
    plant(registry, 6, tmp_path)
    assert_quiet(*into_closed_pipe(*argv))


@pytest.mark.parametrize("argv", [("stats",), ("stats", "--json"), ("inspect",),
                                  ("inspect", "--raw-ids")])
def test_readers_of_a_batch_into_a_closed_pipe_end_quietly(
        argv: tuple[str, ...], batch: Path) -> None:  # noqa: F811
    assert_quiet(*into_closed_pipe(argv[0], str(batch), *argv[1:]))


async def test_resume_into_a_closed_pipe_ends_quietly_and_resumes(
        registry: Registry, tmp_path: Path, start_sim: Any) -> None:
    sim = start_sim(*SLOW)
    write_prompts(tmp_path / "prompts.jsonl", 40)
    record = (await asyncio.to_thread(launch_detached, batch_config(tmp_path, sim.url))).record
    pause = await asyncio.to_thread(subprocess.run, [eagle_tui_command(), "pause", record.id],
                                    capture_output=True, text=True, timeout=120)
    assert pause.returncode == 0, pause.stderr
    status, stderr = await asyncio.to_thread(into_closed_pipe, "resume", record.id)
    assert_quiet(status, stderr)
    shown = await asyncio.to_thread(subprocess.run, [eagle_tui_command(), "batches", record.id],
                                    capture_output=True, text=True, timeout=120)
    assert "state     running" in shown.stdout  # the resume itself was done


def test_the_pipelines_people_type_show_no_traceback(registry: Registry,
                                                     tmp_path: Path) -> None:
    """In a real terminal, the shell's pipelines as the issue typed them, and with a
    reader that leaves at once (`| true`), which always closes the pipe first."""
    records = plant(registry, 12, tmp_path)
    script = "; ".join(
        f"{line}; echo \"exit=$?\""
        for line in (f"{shlex.quote(eagle_tui_command())} batches | head -4",
                     f"{shlex.quote(eagle_tui_command())} batches --json | true",
                     f"{shlex.quote(eagle_tui_command())} batches {records[0].id} | head -1",
                     f"{shlex.quote(eagle_tui_command())} stop {records[0].id} | true"))
    with PtyTerminal(["-c", f"set -o pipefail; {script}; echo all-done; exec sleep 60"],
                     program="/bin/bash", cols=160, rows=60,
                     env={"EAGLE_TUI_STATE_DIR": os.environ["EAGLE_TUI_STATE_DIR"]}) as terminal:
        terminal.wait_for("all-done", timeout=240)
        screen = terminal.text()
    assert "Traceback" not in screen and "BrokenPipe" not in screen, screen
    assert "Exception ignored" not in screen, screen
    exits = [line.strip() for line in screen.splitlines() if line.startswith("exit=")]
    # head -4 reads every line of a short listing before leaving: 0 or 141, both quiet
    assert exits[0] in ("exit=0", f"exit={CLOSED}") and exits[1] == f"exit={CLOSED}", exits
    assert exits[3] == "exit=5", exits  # stop of a done batch: its own status, said on stderr
    assert "it is done; nothing left to stop" in screen

"""The demo's keeper: a small process that cleans up after ``eagle-tui demo`` however it ends.

``eagle-tui demo`` starts it first, in a session of its own (a Ctrl-C or a closed terminal
never reaches it), with a pipe from the demo on its standard input. Every process the demo
starts afterwards carries ``MARKER_ENV`` in its environment (the simulated server, its
restarts, the batch worker: they inherit the demo's environment). The keeper cleans up

* when the demo writes ``quit`` (it is quitting: the keeper answers ``clean`` once done;
  ``quit keep`` stops the processes but keeps the files and the record, and marks the run
  kept: a ``kept`` file in it, which ``demo --keep`` also writes at the start, so a kept
  demo that dies keeps its files too),
* when the pipe closes without it (the demo died: SIGHUP from an SSH drop, SIGTERM, a
  crash, SIGKILL),

by stopping every process that carries the marker (SIGTERM twice, which aborts a batch
worker's in-flight requests, then SIGKILL), forgetting every registry record whose batch
lives in the run directory, and removing the run directory. It sweeps once more after the
demo process has gone (something it was starting may have appeared meanwhile), then exits.
On starting, it also sweeps earlier runs whose demo and keeper are both gone; a kept run
only has its leftover processes stopped (its files and record are the user's now).

    python -m eagle_tui.tui.demokeeper --run DIR --owner PID --registry DIR

Imports only ``core`` and psutil: it starts in a fraction of a second.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import psutil

from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.errors import BatchError
from eagle_tui.core.fsio import read_small
from eagle_tui.core.logsetup import log_to_stderr

log = logging.getLogger("eagle_tui.tui.demokeeper")

MARKER_ENV = "EAGLE_TUI_DEMO_RUN"
OWNER_FILE = "owner.pid"
KEPT_FILE = "kept"
"""In a run directory: the user asked to keep it (``demo --keep``); no sweep removes it."""
TERM_GRACE_S = 0.4
"""The demo's processes are disposable: a short grace, then SIGKILL."""
KILL_WAIT_S = 1.0
OWNER_GONE_WAIT_S = 30.0


def marked_processes(run: str, spare: Sequence[int]) -> list[psutil.Process]:
    """Every process whose environment names ``run`` as its demo run (except ``spare``)."""
    found = []
    for process in psutil.process_iter():
        if process.pid in spare:
            continue
        try:
            if process.environ().get(MARKER_ENV) == run:
                found.append(process)
        except (psutil.Error, OSError):
            continue
    return found


def stop_processes(processes: list[psutil.Process]) -> None:
    """SIGTERM twice (a batch worker aborts on the second), then SIGKILL what is left."""
    for _ in range(2):
        for process in processes:
            with contextlib.suppress(psutil.Error):
                process.terminate()
        time.sleep(0.05)
    alive = _wait_dead(processes, TERM_GRACE_S)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    _wait_dead(alive, KILL_WAIT_S)


def _wait_dead(processes: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until every process has exited (a zombie counts: the demo, its parent, reaps
    it, or is gone itself); the ones still running after ``timeout``."""
    deadline = time.monotonic() + timeout
    alive = processes
    while alive and time.monotonic() < deadline:
        time.sleep(0.02)
        alive = [p for p in alive if _running(p)]
    return [p for p in alive if _running(p)]


def _running(process: psutil.Process) -> bool:
    try:
        return bool(process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def forget_batches(registry: Registry, run: Path) -> None:
    """Forget every registry record whose batch directory is inside ``run``."""
    try:
        records = registry.all()
    except (OSError, BatchError) as exc:
        log.warning("cannot read the registry: %s", exc)
        return
    for record in records:
        if Path(record.out_dir).is_relative_to(run):
            registry.forget(record.id)
            with contextlib.suppress(OSError):
                Path(record.socket).unlink(missing_ok=True)


def sweep(run: Path, registry: Registry, spare: Sequence[int], *, keep: bool = False) -> int:
    """Stop the run's processes, forget its batches and remove its directory (unless
    ``keep``); how many processes were stopped."""
    processes = marked_processes(str(run), spare)
    stop_processes(processes)
    if not keep:
        forget_batches(registry, run)
        shutil.rmtree(run, ignore_errors=True)
    return len(processes)


def sweep_stale(base: Path, registry: Registry, keep: Path) -> None:
    """Clean runs under ``base`` (but ``keep``) whose demo and keeper are both gone (a
    keeper that was itself killed): what ``status`` would otherwise keep reporting."""
    for run in base.glob("run-*"):
        if run == keep or _owner_alive(run):
            continue
        sweep(run, registry, spare=(os.getpid(),), keep=is_kept(run))


def is_kept(run: Path) -> bool:
    """The user asked to keep this run's files (``demo --keep``)."""
    return (run / KEPT_FILE).exists()


def mark_kept(run: Path) -> None:
    """Mark ``run`` as kept: later sweeps stop its processes but leave its files."""
    with contextlib.suppress(OSError):
        (run / KEPT_FILE).write_text("kept by demo --keep\n")


def _owner_alive(run: Path) -> bool:
    try:
        pids = [int(p) for p in read_small(run / OWNER_FILE, 4096, "owner file").split()]
    except (OSError, ValueError):
        return False
    return any(psutil.pid_exists(pid) for pid in pids)


def main(argv: Sequence[str] | None = None) -> int:
    """Wait for ``quit`` or the end of the pipe, then clean up (see the module docstring)."""
    args = _parser().parse_args(argv)
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)  # only the pipe ends the keeper's wait
    log_to_stderr()
    run, registry, spare = args.run, Registry(args.registry), (os.getpid(), args.owner)
    sweep_stale(run.parent, registry, keep=run)  # earlier demos whose keeper was killed too
    words = sys.stdin.readline().split()
    quitting, keep = words[:1] == ["quit"], "keep" in words or is_kept(run)
    if keep:
        mark_kept(run)
    stopped = sweep(run, registry, spare, keep=keep)
    log.info("%s: stopped %d processes (%s)", run, stopped, "quit" if quitting else "demo gone")
    if quitting:
        with contextlib.suppress(OSError):
            print("clean", flush=True)
    _wait_gone(args.owner)
    if sweep(run, registry, spare=(os.getpid(),), keep=keep):
        log.info("%s: stopped processes started while quitting", run)
    return 0


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + OWNER_GONE_WAIT_S
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        time.sleep(0.05)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m eagle_tui.tui.demokeeper")
    parser.add_argument("--run", type=Path, required=True, help="the demo's run directory")
    parser.add_argument("--owner", type=int, required=True, help="PID of the demo")
    parser.add_argument("--registry", type=Path, required=True, help="the batch registry")
    return parser


if __name__ == "__main__":
    raise SystemExit(main())

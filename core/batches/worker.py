"""The detached batch worker: ``python -m eagle_tui.core.batches.worker --batch ID ...``.

(``core.batches.daemon`` starts it detached from its launcher.)

One process per running batch. It takes the output directory's lock, rebuilds the
capture config from the registry record (secrets from its environment), serves the
control API on the batch's socket and runs ``CaptureEngine`` in the same event loop. At
the end it writes how the batch ended into the record, sends ``end`` to event clients and
removes the socket; the kernel releases the lock even if the worker is killed.

Signals, as for a foreground capture: SIGTERM or SIGINT stops the batch (in-flight
requests drain for the batch's grace period, everything finished is flushed); a second
one aborts in-flight requests at once. SIGHUP is ignored: there is no terminal to hang up,
and a batch must outlive the session that started it.

Exit status: 0 clean, 1 some rows failed or were rejected, 3 the run failed, 2 the batch
could not start (config, tokenizer, output directory), 4 another worker holds the
directory.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil
from msgspec import UNSET

from eagle_tui.core.accept.requests import stored_acceptance
from eagle_tui.core.batches.api import (
    BatchInfo,
    Hello,
    RecentSample,
    RecentSamples,
)
from eagle_tui.core.batches.control_app import ControlApi
from eagle_tui.core.batches.control_server import ControlServer
from eagle_tui.core.batches.hub import EventHub
from eagle_tui.core.batches.ready import ReadyChannel
from eagle_tui.core.batches.registry import BatchRecord, Registry
from eagle_tui.core.batches.runstate import EXIT_CANNOT_START, RunOutcome, outcome_of
from eagle_tui.core.batches.secretenv import secrets_from_env
from eagle_tui.core.batches.status import RecentErrors, StatusBuilder, WatchTally
from eagle_tui.core.batchstate import BatchState, public_state
from eagle_tui.core.capture.engine import CaptureEngine
from eagle_tui.core.capture.events import CaptureEvent, EventSink
from eagle_tui.core.errors import BatchError, BatchLocked, EagleError
from eagle_tui.core.logsetup import log_to_stderr
from eagle_tui.core.shards.batchdir.lock import OutputLock
from eagle_tui.core.shards.schema import ShardRow

log = logging.getLogger("eagle_tui.core.batches.worker")

EXIT_LOCKED = 4
PROGRESS_SAVE_S = 15.0
RECENT_ROWS = 50
"""Finished rows a worker keeps for ``GET /recent`` (a spot-check before the first shard)."""
START_POLL_S = 0.05


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the worker process."""
    args = _parser().parse_args(argv)
    log_to_stderr()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    ready = ReadyChannel(args.ready_fd)
    try:
        return asyncio.run(Worker(Registry(args.registry), args.batch, ready).run())
    finally:
        ready.close()


class Worker:
    """One batch's worker: lock, engine, control server, record keeping."""

    def __init__(self, registry: Registry, batch_id: str, ready: ReadyChannel) -> None:
        self._registry = registry
        self._batch_id = batch_id
        self._ready = ready
        self._signals = 0
        self._start_failure: str | None = None
        self._recent, self._watch, self._hub = RecentErrors(), WatchTally(), EventHub()
        self._rows: deque[RecentSample] = deque(maxlen=RECENT_ROWS)

    async def run(self) -> int:
        """Run the batch to its end; the process exit status."""
        try:
            record = self._registry.load(self._batch_id)
            lock = OutputLock(Path(record.out_dir)).acquire(batch_id=record.id)
        except EagleError as e:  # not ours to write (UntrustedOutput), locked, no record
            log.error("%s", e)
            locked = isinstance(e, BatchLocked)
            self._ready.fail(str(e), kind="locked" if locked else "error")
            return EXIT_LOCKED if locked else EXIT_CANNOT_START
        with lock:
            code = await self._run_locked(record)
        # Reported only now, so the launcher finds the record final and the directory free.
        if self._start_failure is not None:
            self._ready.fail(self._start_failure)
        return code

    async def _run_locked(self, record: BatchRecord) -> int:
        try:
            engine = _make_engine(record, self._sink,
                                  on_row=lambda row: self._rows.append(recent_sample(row)))
        except EagleError as e:
            return self._cannot_start(record, str(e))
        record = self._registry.update(  # a new run starts now
            record.id, pid=os.getpid(), pid_started=_process_start_time(),
            started_at=time.time(), runs=record.runs + 1, final_state=None, reason=None,
            exit_code=None, ended_at=None, dispatch_started_at=None)
        server = ControlServer(self._api(engine, record), engine, self._hub,
                               Path(record.socket))
        try:
            await server.start()
        except (OSError, BatchError) as e:
            return self._cannot_start(record, f"cannot serve {record.socket}: {e}")
        self._ready.listening(pid=os.getpid(), socket=record.socket)
        log.info("batch %s: pid %d, control socket %s", record.id, os.getpid(), record.socket)
        outcome = await self._run_engine(engine, record)
        await server.close(outcome.end_event())
        return outcome.exit_code

    async def _run_engine(self, engine: CaptureEngine, record: BatchRecord) -> RunOutcome:
        self._install_signal_handlers(engine)
        run = asyncio.create_task(engine.run())
        await self._report_start(engine, run, record)
        saver = asyncio.create_task(self._save_progress(engine, record.id))
        outcome = await outcome_of(run, engine)
        saver.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await saver
        self._finish_record(record, outcome)
        return outcome

    def _sink(self, event: CaptureEvent) -> None:
        self._recent.note(event)
        self._watch.note(event)
        self._hub.publish(event)

    def _api(self, engine: CaptureEngine, record: BatchRecord) -> ControlApi:
        batch = _batch_info(record)
        status = StatusBuilder(batch, engine.progress, self._hub, self._recent, self._watch,
                               Path(record.out_dir))

        def hello() -> Hello:
            progress = engine.progress()
            return Hello(batch=batch, state=public_state(progress.state),
                         progress=progress.counts, servers=progress.servers)

        return ControlApi(engine, status, self._hub, self._watch, hello,
                          recent=lambda: RecentSamples(samples=tuple(self._rows)))

    async def _report_start(self, engine: CaptureEngine, run: asyncio.Task[Any],
                            record: BatchRecord) -> None:
        """Tell the launcher once the batch dispatches (or keep why it could not start).

        The engine has no "prepared" hook yet, so this watches its state leave
        ``starting`` (tokenizer loading and the resume scan happen before).
        """
        while not run.done() and engine.progress().state == BatchState.STARTING:
            await asyncio.wait({run}, timeout=START_POLL_S)
        error = run.exception() if run.done() and not run.cancelled() else None
        if error is not None:
            self._start_failure = str(error)
            return
        self._registry.update(record.id, dispatch_started_at=time.time())
        self._ready.started()

    async def _save_progress(self, engine: CaptureEngine, batch_id: str) -> None:
        """Keep the last known counts in the record, for when the worker dies."""
        while True:
            await asyncio.sleep(PROGRESS_SAVE_S)
            data = engine.progress().counts
            try:
                await asyncio.to_thread(self._registry.update, batch_id, last_progress=data)
            except (OSError, BatchError) as e:
                log.warning("could not save progress to the registry: %s", e)

    def _finish_record(self, record: BatchRecord, outcome: RunOutcome) -> None:
        try:
            self._registry.update(
                record.id, final_state=outcome.state, reason=outcome.reason,
                exit_code=outcome.exit_code, ended_at=time.time(),
                last_progress=outcome.progress)
        except (OSError, BatchError) as e:
            log.error("could not record the end of batch %s: %s", record.id, e)
        log.info("batch %s ended: %s%s", record.id, outcome.state,
                 f" ({outcome.reason})" if outcome.reason else "")

    def _cannot_start(self, record: BatchRecord, message: str) -> int:
        log.error("batch %s cannot start: %s", record.id, message)
        self._start_failure = message
        try:
            self._registry.update(record.id, final_state=BatchState.FAILED, reason=message,
                                  exit_code=EXIT_CANNOT_START, ended_at=time.time())
        except (OSError, BatchError) as e:
            log.error("could not record the failure: %s", e)
        return EXIT_CANNOT_START

    def _install_signal_handlers(self, engine: CaptureEngine) -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._on_stop_signal, engine, signum)

    def _on_stop_signal(self, engine: CaptureEngine, signum: int) -> None:
        self._signals += 1
        name = signal.Signals(signum).name
        if self._signals == 1:
            log.info("%s: stopping; in-flight requests drain (send it again to abort them)",
                     name)
            engine.stop()
        else:
            log.warning("%s again: aborting in-flight requests", name)
            engine.stop(abort=True)


def _make_engine(record: BatchRecord, sink: EventSink,
                 on_row: Callable[[ShardRow], None] | None = None) -> CaptureEngine:
    api_key, servers = secrets_from_env()
    config = record.config.with_secrets(api_key=api_key, servers=servers)
    return CaptureEngine(config, event_sink=sink, on_row=on_row)


def recent_sample(row: ShardRow) -> RecentSample:
    """A stored row as ``GET /recent`` lists it."""
    return RecentSample(
        sample_id=row.sample_id, input_ids=tuple(row.input_ids), prompt_len=row.prompt_len,
        finish_reason=row.finish_reason, matched_stop=row.matched_stop,
        think_end=row.think_end, flags=tuple(row.flags), endpoint=row.endpoint, rid=row.rid,
        latency_s=row.latency_s, created_at=row.created_at.timestamp(),
        acceptance=stored_acceptance(row.acceptance) or UNSET)


def _batch_info(record: BatchRecord) -> BatchInfo:
    return BatchInfo(id=record.id, name=record.name, out_dir=record.out_dir, pid=record.pid,
                     socket=record.socket, log=record.log, started_at=record.started_at,
                     runs=record.runs)


def _process_start_time() -> float | None:
    try:
        return float(psutil.Process().create_time())
    except psutil.Error:  # only a guard against PID reuse; never worth failing for
        return None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m eagle_tui.core.batches.worker",
                                     description="Run one registered capture batch.")
    parser.add_argument("--batch", required=True, help="the batch id in the registry")
    parser.add_argument("--registry", type=Path, default=None,
                        help="registry directory (default: <state dir>/batches)")
    parser.add_argument("--ready-fd", type=int, default=None,
                        help="pipe to report start-up on (set by the launcher)")
    return parser


if __name__ == "__main__":
    raise SystemExit(main())

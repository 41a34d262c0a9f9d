"""Starting a capture batch as a detached worker.

``launch_detached(config)`` registers the batch (or re-uses the record of the same output
directory), starts ``python -m eagle_tui.core.batches.daemon`` in a new session with stdin
from ``/dev/null`` and stdout/stderr appended to ``<out_dir>/worker.log``, and waits on a
pipe until the worker reports that it is dispatching, that it cannot start (raised, with its
reason), or dies (raised, with the log's tail). A worker still loading its tokenizer when
``ready_timeout_s`` passes is left running and reported as starting. The ``capture
--detach`` front end is ``eagle_tui.tui.cli.batch_verbs.run_detached``.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec

from eagle_tui.core.batches.ready import FAILED, READY_DECODER, STARTED, ReadyMessage
from eagle_tui.core.batches.registry import BatchRecord, Registry, new_batch_id
from eagle_tui.core.batches.secretenv import has_secrets, worker_env
from eagle_tui.core.batches.sockpath import control_socket_path
from eagle_tui.core.capture.config import CaptureConfig
from eagle_tui.core.errors import BatchLocked, UnfitFile, UntrustedOutput, WorkerStartFailed
from eagle_tui.core.fsio import UnsafeFile, open_append, read_tail
from eagle_tui.core.sglang.client import API_KEY_ENV
from eagle_tui.core.shards.batchdir.layout import BatchDir
from eagle_tui.core.shards.batchdir.lock import holder_of
from eagle_tui.core.shards.batchdir.owned import claim_batch_dir
from eagle_tui.core.urls import ServerURL
from eagle_tui.core.wire import explain

READY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Launched:
    """A detached batch that was started; ``started`` is False if it is still preparing."""

    record: BatchRecord
    started: bool


def launch_detached(config: CaptureConfig, *, name: str | None = None,
                    registry: Registry | None = None,
                    ready_timeout_s: float = READY_TIMEOUT_S) -> Launched:
    """Register and start a detached worker for ``config`` (see the module docstring)."""
    registry = registry or Registry()
    config = _absolute(config)
    claim_batch_dir(config.out_dir)  # ours and writable by nobody else, or UntrustedOutput
    holder = holder_of(config.out_dir)
    if holder is not None:
        raise BatchLocked(f"{config.out_dir} is already being captured by {holder.describe()}; "
                          "stop that batch or choose another --out", holder_pid=holder.pid)
    record = _register(registry, config, name)
    read_fd, write_fd = os.pipe()
    try:
        _spawn(record, registry, config, write_fd)
    finally:
        os.close(write_fd)
    try:
        started = _await_start(read_fd, record, time.monotonic() + ready_timeout_s)
    finally:
        os.close(read_fd)
    return Launched(registry.load(record.id), started)


def relaunch(record: BatchRecord, registry: Registry, *,
             servers: tuple[ServerURL, ...] | None = None, api_key: str | None = None,
             retry_failed: bool = False,
             ready_timeout_s: float = READY_TIMEOUT_S) -> Launched:
    """Start a new worker for a batch whose worker ended (interrupted, stopped, failed).

    Secrets come only from what is given now: ``api_key`` (the caller's key file), else
    ``EAGLE_TUI_API_KEY`` of our environment; never from anything stored. ``servers``
    replaces the recorded server list (a moved server, or URLs that carry credentials).
    ``retry_failed`` resends rows that failed as too long for the context.

    A new worker that cannot start (the prompt file is gone, a changed tokenizer) leaves
    the batch as it was (a stopped batch stays stopped, with its rows and total), its
    record noting why the resume failed; the error is raised for the caller to show.
    """
    api_key = api_key or os.environ.get(API_KEY_ENV) or None
    config = msgspec.structs.replace(record.config.with_secrets(api_key=api_key,
                                                                servers=servers),
                                     resume=True, retry_failed=retry_failed)
    try:
        return launch_detached(config, name=record.name, registry=registry,
                               ready_timeout_s=ready_timeout_s)
    except WorkerStartFailed as e:
        registry.save(record.replace(reason=f"resume failed: {str(e).splitlines()[0]}"))
        raise


def _absolute(config: CaptureConfig) -> CaptureConfig:
    """Paths made absolute: the worker runs in another directory."""
    tokenizer = config.tokenizer.resolve() if config.tokenizer.exists() else config.tokenizer
    model_dir = config.model_dir.resolve() if config.model_dir else None
    return msgspec.structs.replace(config, prompts=config.prompts.resolve(),
                               out_dir=config.out_dir.resolve(), tokenizer=tokenizer,
                               model_dir=model_dir)


def _register(registry: Registry, config: CaptureConfig, name: str | None) -> BatchRecord:
    out_dir = config.out_dir
    now = time.time()
    existing = registry.for_out_dir(out_dir)
    batch_id = existing.id if existing else new_batch_id()
    stored = config.without_secrets()
    base = existing or BatchRecord(
        id=batch_id, name=name or out_dir.name, out_dir=str(out_dir),
        socket=str(control_socket_path(out_dir, batch_id)), log=str(BatchDir(out_dir).worker_log),
        config=stored, created_at=now)
    record = base.replace(
        name=name or base.name, config=stored, launched_at=now, pid=None, pid_started=None,
        final_state=None, reason=None, exit_code=None, ended_at=None,
        needs_secrets=has_secrets(config))
    registry.save(record)
    return record


def _spawn(record: BatchRecord, registry: Registry, config: CaptureConfig, ready_fd: int) -> (
    None
):
    out_dir = Path(record.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = worker_env(config)
    env.setdefault("PYTHONUNBUFFERED", "1")
    command = [sys.executable, "-m", "eagle_tui.core.batches.daemon", "--batch", record.id,
               "--registry", str(registry.root), "--ready-fd", str(ready_fd)]
    try:  # never through a link planted at worker.log (fsio.open_append)
        log = os.fdopen(open_append(Path(record.log), "worker log"), "ab")
    except UnsafeFile as e:
        raise UntrustedOutput(str(e)) from None
    with log:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        log.write(f"\n=== {stamp} eagle-tui: starting batch {record.id} ===\n".encode())
        log.flush()
        first = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, pass_fds=(ready_fd,),
                                 start_new_session=True, cwd=out_dir, env=env)
    code = first.wait(timeout=60)  # it forks the worker and exits at once
    if code != 0:
        raise WorkerStartFailed(f"the batch worker could not be started (exit {code}); "
                                f"log {record.log}:\n{log_tail(Path(record.log))}")


def _await_start(read_fd: int, record: BatchRecord, deadline: float) -> bool:
    """True once the worker dispatches; False if it is still preparing at ``deadline``."""
    buffer = b""
    while (remaining := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([read_fd], [], [], remaining)
        if not readable:
            break
        chunk = os.read(read_fd, 65536)
        if not chunk:
            raise WorkerStartFailed(
                f"batch {record.id}'s worker exited before it started capturing; log "
                f"{record.log}:\n{log_tail(Path(record.log))}")
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip() and _final(_parse(line, record), record):
                return True
    return False


def _final(message: ReadyMessage, record: BatchRecord) -> bool:
    """True for ``started``; raises for ``failed``; False for anything else."""
    if message.event == STARTED:
        return True
    if message.event == FAILED:
        text = message.message or "unknown reason"
        if message.kind == "locked":
            raise BatchLocked(text)
        raise WorkerStartFailed(f"batch {record.id} could not start: {text} (log {record.log})")
    return False


def _parse(line: bytes, record: BatchRecord) -> ReadyMessage:
    try:
        return READY_DECODER.decode(line)
    except msgspec.DecodeError as e:
        raise WorkerStartFailed(
            f"batch {record.id}'s worker sent a start-up report that does not fit ({explain(e)}: "
            f"{line[:200]!r}); it may run another eagle-tui version; log {record.log}") from None


def log_tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log, for error messages."""
    try:
        text = read_tail(path, 16384, "worker log", follow=False).decode(
            "utf-8", errors="replace")
    except (OSError, UnfitFile) as e:
        return f"(log unreadable: {e})"
    return "\n".join(text.splitlines()[-lines:])

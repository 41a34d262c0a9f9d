"""The registry of detached batches: one JSON record per batch under ``<state>/batches/``.

A record says how to find and restart a batch (directory, control socket, log, config
without secrets) and, once its worker ended, how it ended. It is written by the launcher
(``detach``) and then by the worker itself; every write is atomic (temp file, fsync,
rename) and read-modify-write updates hold ``.registry.lock``, so readers never see a torn
record and two writers never lose each other's fields.

Trust (``core.trust``, like ssh and gpg): the state directory and the registry must be ours
and writable by nobody else (both are created 0700, records 0600), and every record must be
a plain file of ours. Otherwise ``UntrustedState`` names the path and the fix: a record
another user could have written would send our API key to their server or run their code.
An untrusted record among trusted ones is skipped by ``all`` (logged) and refused by
``load``.

A record never says whether its worker is alive: that is derived when asked
(``core.batches.survey``) from the output directory's lock and the control socket, so a
SIGKILLed worker simply shows up as interrupted.

``BatchRecord`` is a msgspec struct: the file is written from it and read into it, types
checked (a record with a value of the wrong type, or a state that does not exist, is
unreadable, and the error names the file and the field); keys written by a newer version
are ignored.
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from eagle_tui.core import trust
from eagle_tui.core.batchstate import FINAL_STATES, BatchState
from eagle_tui.core.capture.config import CaptureConfig
from eagle_tui.core.capture.progress import Progress
from eagle_tui.core.errors import BatchError, BatchNotFound, ConfigError, UntrustedState
from eagle_tui.core.fsio import fsync_dir, write_atomic
from eagle_tui.core.paths import state_dir
from eagle_tui.core.wire import decoder, enc_hook, explain

log = logging.getLogger(__name__)

RECORD_VERSION = 1
__all__ = ["FINAL_STATES", "RECORD_VERSION", "BatchRecord", "Registry", "new_batch_id",
           "read_record"]


class BatchRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One registered batch. Times are Unix seconds; ``final_state`` is set at worker exit;
    ``last_progress`` is None until the worker saved some."""

    id: str
    name: str
    out_dir: str
    socket: str
    log: str
    config: CaptureConfig  # always ``without_secrets``
    created_at: float
    launched_at: float | None = None
    pid: int | None = None
    pid_started: float | None = None  # the process's start time: guards against PID reuse
    started_at: float | None = None
    dispatch_started_at: float | None = None
    runs: int = 0
    ended_at: float | None = None
    final_state: BatchState | None = None
    reason: str | None = None
    exit_code: int | None = None
    needs_secrets: bool = False
    last_progress: Progress | None = None
    version: int = RECORD_VERSION

    def __post_init__(self) -> None:
        # Records written before any progress was saved hold ``{}``: no progress at all.
        if self.last_progress == _NO_PROGRESS:
            msgspec.structs.force_setattr(self, "last_progress", None)

    def replace(self, **changes: Any) -> BatchRecord:
        """A copy with ``changes``, checked like a record read from disk (BatchError)."""
        record = msgspec.structs.replace(self, **changes)
        try:
            return _DECODER.decode(_ENCODER.encode(record))
        except (msgspec.DecodeError, TypeError, ConfigError) as e:
            detail = explain(e) if isinstance(e, msgspec.DecodeError) else str(e)
            raise BatchError(f"cannot update batch {self.id}: {detail}") from e


_NO_PROGRESS = Progress()
_ENCODER = msgspec.json.Encoder(order="sorted", enc_hook=enc_hook)
_DECODER = decoder(BatchRecord)


def new_batch_id() -> str:
    """A sortable, unique, short id: ``YYYYmmdd-HHMMSS-xxxx``."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


class Registry:
    """The records under ``root`` (default ``<state dir>/batches``)."""

    def __init__(self, root: Path | None = None) -> None:
        self._state = state_dir() if root is None else None
        self.root = root if root is not None else state_dir() / "batches"
        self.untrusted: list[str] = []  # why records were skipped by the last all()

    def _check_root(self, *, create: bool = False) -> bool:
        """Raise UntrustedState unless the state dir and registry are safely ours; False
        when the registry does not exist (and ``create`` is not set)."""
        places = [(self.root, "batch registry")]
        if self._state is not None:
            places.insert(0, (self._state, "state directory"))
        for place, what in places:
            check = trust.ensure_private_dir if create else trust.dir_problem
            problem = check(place, what=what)
            if problem is not None:
                raise UntrustedState(problem)
        return create or self.root.is_dir()

    def path_of(self, batch_id: str) -> Path:
        """Where the record of ``batch_id`` lives."""
        return self.root / f"{batch_id}.json"

    def save(self, record: BatchRecord) -> None:
        """Write ``record`` atomically (creating the registry, mode 0700)."""
        self._check_root(create=True)
        path = self.path_of(record.id)
        write_atomic(path, msgspec.json.format(_ENCODER.encode(record), indent=1))
        os.chmod(path, 0o600)
        fsync_dir(self.root)

    def load(self, batch_id: str) -> BatchRecord:
        """The record of ``batch_id``; BatchNotFound when there is none, BatchError (naming
        the file and the field) when it is unreadable."""
        path = self.path_of(batch_id)
        self._check_root()
        try:
            return read_record(path)
        except FileNotFoundError as e:
            raise BatchNotFound(f"no batch {batch_id!r} in {self.root}") from e

    def update(self, batch_id: str, **changes: Any) -> BatchRecord:
        """Change some fields of a record under the registry lock; the new record."""
        with self._locked():
            record = self.load(batch_id).replace(**changes)
            self.save(record)
            return record

    def all(self) -> list[BatchRecord]:
        """Every readable record, oldest first (unreadable ones are logged and skipped)."""
        records = []
        self.untrusted = []
        for path in sorted(self.root.glob("*.json")) if self._check_root() else []:
            try:
                records.append(read_record(path))
            except UntrustedState as e:
                self.untrusted.append(str(e))
                log.warning("skipping batch record: %s", e)
            except (OSError, BatchError) as e:
                log.warning("skipping unreadable batch record %s: %s", path, e)
        return sorted(records, key=lambda r: r.created_at)

    def for_out_dir(self, out_dir: Path) -> BatchRecord | None:
        """The record of the batch writing ``out_dir``, if any."""
        wanted = os.path.realpath(out_dir)
        for record in self.all():
            if os.path.realpath(record.out_dir) == wanted:
                return record
        return None

    def find(self, ref: str) -> BatchRecord:
        """The batch ``ref`` names: an id, a unique id prefix, a name or its directory."""
        records = self.all()
        for match in (
            lambda r: r.id == ref,
            lambda r: r.name == ref,
            lambda r: _same_dir(r.out_dir, ref),
            lambda r: r.id.startswith(ref) or r.id.endswith(ref),
        ):
            found = [r for r in records if match(r)]
            if len(found) == 1:
                return found[0]
            if len(found) > 1:
                ids = ", ".join(r.id for r in found)
                raise BatchNotFound(f"{ref!r} matches several batches ({ids}); give an id")
        if self.untrusted:  # the batch asked for may be one of them: say so, not "no batch"
            raise UntrustedState(f"no trusted batch matches {ref!r}; skipped: "
                                 + "; ".join(self.untrusted))
        known = ", ".join(f"{r.id} ({r.name})" for r in records[-5:]) or "none"
        raise BatchNotFound(f"no batch matches {ref!r} (recent: {known}); "
                            "`eagle-tui batches` lists them")

    def forget(self, batch_id: str) -> None:
        """Remove a record (the batch directory is left alone)."""
        self.path_of(batch_id).unlink(missing_ok=True)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self._check_root(create=True)
        fd = os.open(self.root / ".registry.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def read_record(path: Path) -> BatchRecord:
    """The record in ``path``, read only if it is safely ours (``core.trust``):
    FileNotFoundError when there is none, UntrustedState when another user could have
    written it, BatchError naming the file and the field when it does not fit."""
    try:
        data, problem = trust.read_private(path, what="batch record")
    except FileNotFoundError:
        raise
    except OSError as e:
        raise BatchError(f"batch record {path} is unreadable ({e}); delete it") from e
    if problem is not None:
        raise UntrustedState(problem)
    try:
        return _DECODER.decode(data)
    except (msgspec.DecodeError, ConfigError) as e:
        detail = explain(e) if isinstance(e, msgspec.DecodeError) else str(e)
        raise BatchError(f"batch record {path} is unreadable ({detail}); delete it (its "
                         "batch directory stays; `eagle-tui capture --out DIR --resume "
                         "--detach ...` registers it again)") from e


def _same_dir(recorded: str, ref: str) -> bool:
    if "/" not in ref and not Path(ref).is_dir():
        return False
    return os.path.realpath(recorded) == os.path.realpath(ref)

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
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import logging
import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_tui.core import trust
from eagle_tui.core.errors import BatchError, BatchNotFound, UntrustedState
from eagle_tui.core.fsio import fsync_dir, write_atomic
from eagle_tui.core.paths import state_dir

log = logging.getLogger(__name__)

RECORD_VERSION = 1
FINAL_STATES = ("done", "stopped", "failed")


@dataclass(frozen=True)
class BatchRecord:
    """One registered batch. Times are Unix seconds; ``final_state`` is set at worker exit."""

    id: str
    name: str
    out_dir: str
    socket: str
    log: str
    config: dict[str, Any]
    created_at: float
    launched_at: float | None = None
    pid: int | None = None
    pid_started: float | None = None  # the process's start time: guards against PID reuse
    started_at: float | None = None
    dispatch_started_at: float | None = None
    runs: int = 0
    ended_at: float | None = None
    final_state: str | None = None
    reason: str | None = None
    exit_code: int | None = None
    needs_secrets: bool = False
    last_progress: dict[str, Any] = field(default_factory=dict)
    version: int = RECORD_VERSION

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BatchRecord:
        """Inverse of ``to_json``; keys written by a newer version are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


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

    def _read(self, path: Path) -> BatchRecord:
        """A record file, read only if it is safely ours (UntrustedState otherwise)."""
        data, problem = trust.read_private(path, what="batch record")
        if problem is not None:
            raise UntrustedState(problem)
        return BatchRecord.from_json(json.loads(data.decode("utf-8")))

    def path_of(self, batch_id: str) -> Path:
        """Where the record of ``batch_id`` lives."""
        return self.root / f"{batch_id}.json"

    def save(self, record: BatchRecord) -> None:
        """Write ``record`` atomically (creating the registry, mode 0700)."""
        self._check_root(create=True)
        text = json.dumps(record.to_json(), indent=1, sort_keys=True)
        path = self.path_of(record.id)
        write_atomic(path, text.encode("utf-8"))
        os.chmod(path, 0o600)
        fsync_dir(self.root)

    def load(self, batch_id: str) -> BatchRecord:
        """The record of ``batch_id``; BatchNotFound when there is none."""
        path = self.path_of(batch_id)
        self._check_root()
        try:
            return self._read(path)
        except FileNotFoundError as e:
            raise BatchNotFound(f"no batch {batch_id!r} in {self.root}") from e
        except (OSError, ValueError, TypeError, AttributeError) as e:
            raise BatchError(f"batch record {path} is unreadable ({e}); delete it") from e

    def update(self, batch_id: str, **changes: Any) -> BatchRecord:
        """Change some fields of a record under the registry lock; the new record."""
        with self._locked():
            record = dataclasses.replace(self.load(batch_id), **changes)
            self.save(record)
            return record

    def all(self) -> list[BatchRecord]:
        """Every readable record, oldest first (unreadable ones are logged and skipped)."""
        records = []
        self.untrusted = []
        for path in sorted(self.root.glob("*.json")) if self._check_root() else []:
            try:
                records.append(self._read(path))
            except UntrustedState as e:
                self.untrusted.append(str(e))
                log.warning("skipping batch record: %s", e)
            except (OSError, ValueError, TypeError, AttributeError) as e:
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


def _same_dir(recorded: str, ref: str) -> bool:
    if "/" not in ref and not Path(ref).is_dir():
        return False
    return os.path.realpath(recorded) == os.path.realpath(ref)

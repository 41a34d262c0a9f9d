"""Where everything in a batch directory is: the one place that spells its file names.

```
OUT/
  manifest.json                  the batch config, every complete shard, counts
  shards/part-00000.parquet      complete shards (part-NNNNN.parquet.tmp while one is written)
  failures.jsonl                 rows given up on in the latest run
  failures.previous.jsonl        the same, of the run before
  rejects.jsonl                  prompt records that could not be used
  capture.log                    a foreground capture's log
  worker.log                     a detached worker's output
  untrusted/                     shard files a resume refused to trust
  control.sock                   a detached worker's control socket (when the path fits)
  .eagle-tui.lock                flock held by the one process controlling the batch
```

:class:`BatchDir` answers "where is X of this batch"; nothing else joins these names to a
directory. Only the standard library: batch bookkeeping, which needs no parquet, uses it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from eagle_tui.core.fsio import TMP_SUFFIX

MANIFEST_NAME = "manifest.json"
SHARDS_DIR = "shards"
SHARD_NAME = "part-{index:05d}.parquet"
FAILURES_NAME = "failures.jsonl"
PREVIOUS_FAILURES_NAME = "failures.previous.jsonl"
REJECTS_NAME = "rejects.jsonl"
CAPTURE_LOG_NAME = "capture.log"
WORKER_LOG_NAME = "worker.log"
UNTRUSTED_DIR = "untrusted"
LOCK_NAME = ".eagle-tui.lock"
CONTROL_SOCKET_NAME = "control.sock"

_SHARD_NAME_RE = re.compile(r"^part-(\d+)\.parquet(?:\.tmp)?$")


@dataclass(frozen=True, slots=True)
class BatchDir:
    """One batch directory (it need not exist yet); every property is a path in it."""

    root: Path

    @classmethod
    def of(cls, directory: str | Path) -> BatchDir:
        """The batch directory at ``directory``."""
        return cls(Path(directory))

    @property
    def manifest(self) -> Path:
        """``manifest.json``: the only list of shards resume and the readers trust."""
        return self.root / MANIFEST_NAME

    @property
    def shards(self) -> Path:
        """``shards/``: the parquet shards."""
        return self.root / SHARDS_DIR

    @property
    def failures(self) -> Path:
        """``failures.jsonl``: the latest run's failures."""
        return self.root / FAILURES_NAME

    @property
    def previous_failures(self) -> Path:
        """``failures.previous.jsonl``: the run before's failures."""
        return self.root / PREVIOUS_FAILURES_NAME

    @property
    def rejects(self) -> Path:
        """``rejects.jsonl``: prompt records that could not be used."""
        return self.root / REJECTS_NAME

    @property
    def capture_log(self) -> Path:
        """``capture.log``: a foreground capture's log (tracebacks go here)."""
        return self.root / CAPTURE_LOG_NAME

    @property
    def worker_log(self) -> Path:
        """``worker.log``: a detached worker's stdout and stderr."""
        return self.root / WORKER_LOG_NAME

    @property
    def untrusted(self) -> Path:
        """``untrusted/``: where resume moves shard files it does not trust."""
        return self.root / UNTRUSTED_DIR

    @property
    def lock(self) -> Path:
        """``.eagle-tui.lock``: the file the controlling process holds a flock on."""
        return self.root / LOCK_NAME

    @property
    def control_socket(self) -> Path:
        """``control.sock``: the preferred place of a detached worker's control socket
        (``core.batches.sockpath`` falls back elsewhere when it cannot be used)."""
        return self.root / CONTROL_SOCKET_NAME

    def holds_batch(self) -> bool:
        """True when the directory has a manifest (a batch was started in it); a link
        there counts, so it is refused when read rather than replaced unseen."""
        return os.path.lexists(self.manifest)

    def shard(self, name: str) -> Path:
        """The shard listed as ``name`` (names are relative to ``shards/``)."""
        return self.shards / name

    def shard_file(self, index: int) -> Path:
        """``shards/part-NNNNN.parquet`` for shard number ``index``."""
        return self.shards / SHARD_NAME.format(index=index)

    def shard_dir_files(self) -> list[Path]:
        """Every regular file and symlink under ``shards/`` (sorted; a link is never
        trusted, so it is listed to be moved aside), or none when it does not exist."""
        if not self.shards.is_dir():
            return []
        return sorted(p for p in self.shards.iterdir() if p.is_symlink() or p.is_file())


def shard_index(name: str) -> int | None:
    """The number in a shard file name (``part-00007.parquet[.tmp]`` -> 7), else None."""
    match = _SHARD_NAME_RE.match(name)
    return int(match.group(1)) if match else None


def is_temp(path: Path) -> bool:
    """True for a shard still being written (or left by a crash): ``….parquet.tmp``."""
    return path.name.endswith(TMP_SUFFIX)

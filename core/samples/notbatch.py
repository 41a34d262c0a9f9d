"""A directory that is no batch, said so rather than counted as an empty one.

``stats`` reads what it is given as it is, so the parent of several batches (or an empty
directory) would read as a batch of 0 rows: a newcomer fears the capture is lost and a
script sees success. :func:`refuse_no_batch` turns that into one line naming the batches
below, as ``export`` and ``inspect`` refuse the same directory.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from eagle_tui.core.errors import ConfigError
from eagle_tui.core.samples.job import Job
from eagle_tui.core.shards.batchdir.layout import MANIFEST_NAME, SHARDS_DIR, BatchDir

NAMED = 3
"""Batches below a directory named in the message (the rest are counted)."""
SCANNED = 1000
"""Entries of a directory looked at for batches below it (a huge directory is not walked)."""


def refuse_no_batch(job: Job, paths: Sequence[str | Path]) -> None:
    """ConfigError when the one path given is a directory with no manifest, no shard and
    nothing unreadable: not a batch, not an empty batch's ``shards/``."""
    if len(paths) != 1:
        return  # several paths are checked as batch directories by open_batches
    path = Path(paths[0]).expanduser()
    if not path.is_dir() or job.manifest is not None or job.shard_count or job.ignored:
        return
    if path.name == SHARDS_DIR and BatchDir(path.parent).holds_batch():
        return  # a fresh batch's shards/: truly 0 rows so far
    raise ConfigError(f"{path} is not a batch directory (no {MANIFEST_NAME}, no shards)"
                      f"{_what_to_pass(path)}")


def _what_to_pass(path: Path) -> str:
    below = batches_below(path)
    if not below:
        return (f"; pass a batch directory (what `eagle-tui capture --out` wrote: "
                f"{MANIFEST_NAME} and {SHARDS_DIR}/)")
    named = ", ".join(below[:NAMED]) + (f" and {len(below) - NAMED} more"
                                        if len(below) > NAMED else "")
    return (f"; it holds batch directories ({named}): pass one of them, or the --shard "
            "slices of one job together")


def batches_below(path: Path) -> list[str]:
    """Names of the batch directories directly inside ``path`` (of its first entries)."""
    try:
        entries = list(itertools.islice(path.iterdir(), SCANNED))
    except OSError:
        return []
    return sorted(entry.name for entry in entries if _is_batch(entry))


def _is_batch(entry: Path) -> bool:
    try:
        return entry.is_dir() and BatchDir(entry).holds_batch()
    except OSError:
        return False


__all__ = ["batches_below", "refuse_no_batch"]

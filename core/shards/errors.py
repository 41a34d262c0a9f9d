"""Shard errors (both subclass ``core.errors.EagleError``)::

    EagleError
    └── ShardError            a shard or shard directory that cannot be read as one
        └── ShardWriteError   a shard could not be written; ``lost_sample_ids`` were not saved
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from eagle_tui.core.errors import EagleError


class ShardError(EagleError):
    """A shard file or batch directory that cannot be read as one; names the path."""


class ShardWriteError(ShardError):
    """A shard (or the manifest listing it) could not be written.

    Nothing partial is left behind: no shard file, no manifest entry. ``lost_sample_ids``
    are the rows that were in that shard; they are not saved, and resume captures them again.
    """

    def __init__(self, message: str, *, path: Path, lost_sample_ids: Sequence[str]) -> None:
        super().__init__(message)
        self.path = path
        self.lost_sample_ids = tuple(lost_sample_ids)

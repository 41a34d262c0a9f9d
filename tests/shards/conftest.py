"""Fixtures for the shard tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from shard_helpers import new_batch


@pytest.fixture
def batch_dir(tmp_path: Path) -> Path:
    """A batch directory with a saved manifest and no shards."""
    new_batch(tmp_path / "batch")
    return tmp_path / "batch"

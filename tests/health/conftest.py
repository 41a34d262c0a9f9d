"""Health tests: a private state directory for start-up history."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def history_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private state directory, so no test touches the user's start-up history."""
    monkeypatch.setenv("EAGLE_TUI_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state" / "startup-history.jsonl"

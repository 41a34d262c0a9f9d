"""TUI test fixtures: an isolated state and config directory for every test, and helpers
to build the app with fake or real sources."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Input


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own state and config directory (history, logs, themes)."""
    monkeypatch.setenv("EAGLE_TUI_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("EAGLE_TUI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("EAGLE_TUI_THEME", raising=False)
    yield tmp_path


@pytest.fixture
def no_blink(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs never blink their cursor (snapshots stay identical run to run)."""
    original = Input.__init__

    def init(self: Input, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        self.cursor_blink = False

    monkeypatch.setattr(Input, "__init__", init)

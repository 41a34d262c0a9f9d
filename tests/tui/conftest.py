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
    kill_batch_workers(tmp_path / "state")


def kill_batch_workers(state: Path) -> None:
    """Abort every detached batch worker a test left running (SIGKILL if it lingers)."""
    registry_dir = state / "batches"
    if not registry_dir.is_dir():
        return
    from eagle_tui.core.batches.registry import Registry
    from eagle_tui.tui.sources.batches import DetachedCapture

    control = DetachedCapture(Registry(registry_dir))
    for record in control.registry.all():
        control.abort_and_wait(record.id, timeout_s=10.0)


@pytest.fixture
def no_blink(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs never blink their cursor (snapshots stay identical run to run)."""
    original = Input.__init__

    def init(self: Input, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        self.cursor_blink = False

    monkeypatch.setattr(Input, "__init__", init)

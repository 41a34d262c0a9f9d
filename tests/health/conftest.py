"""Health tests: helpers from this directory and tests/process, and a port-holder fixture."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

_HERE = Path(__file__).resolve().parent
for folder in (_HERE, _HERE.parent / "process"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from proc_helpers import Holder, reap, spawn_holder  # noqa: E402


@pytest.fixture
def port_holders() -> Iterator[Callable[..., Any]]:
    """Spawn processes that hold a port (tests/process/portholder.py); all die at teardown."""
    made: list[Holder] = []

    def make(*args: str) -> Holder:
        holder = spawn_holder(*args)
        made.append(holder)
        return holder

    yield make
    for holder in made:
        reap(holder)


@pytest.fixture
def history_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private state directory, so no test touches the user's start-up history."""
    monkeypatch.setenv("EAGLE_TUI_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state" / "startup-history.jsonl"

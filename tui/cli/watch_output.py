"""How ``eagle-tui watch`` prints: one text line or one JSON object per event, flushed."""

from __future__ import annotations

import json
import time
from typing import Any, TextIO

from eagle_tui.core.health.changes import Change
from eagle_tui.core.health.snapshot import HealthSnapshot
from eagle_tui.core.text import duration


class Output:
    """Prints events as text lines or JSON lines, each flushed at once."""

    def __init__(self, stream: TextIO, *, as_json: bool) -> None:
        self.stream = stream
        self.as_json = as_json
        self.last_print = time.monotonic()

    def emit(self, change: Change, snapshot: HealthSnapshot | None) -> None:
        """One event line."""
        elapsed = snapshot.elapsed_s if snapshot is not None else None
        if self.as_json:
            self._json({"event": change.kind, "elapsed_s": _round(elapsed), **change.data})
        else:
            self._text(f"[{duration(elapsed):>7}] {change.text}")

    def say(self, text: str) -> None:
        """An informational line (text mode only)."""
        if not self.as_json:
            self._text(text)

    def final(
        self, outcome: str, code: int, diagnosis: str, snapshot: HealthSnapshot | None
    ) -> None:
        """The verdict line."""
        if self.as_json:
            extra: dict[str, Any] = {}
            if snapshot is not None:
                extra = {
                    "phase": snapshot.phase.value,
                    "pid": snapshot.process.pid if snapshot.process is not None else None,
                    "elapsed_s": _round(snapshot.elapsed_s),
                    "flags": [{"flag": f.name, "evidence": f.evidence} for f in snapshot.flags],
                }
            data = {"event": "verdict", "outcome": outcome, "exit_code": code}
            self._json({**data, "diagnosis": diagnosis, **extra})
        else:
            self._text(f"{outcome.upper()} (exit {code}): {diagnosis}")

    def _json(self, data: dict[str, Any]) -> None:
        self._text(json.dumps(data, default=str))

    def _text(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()
        self.last_print = time.monotonic()


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)

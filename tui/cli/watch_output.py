"""How ``eagle-tui watch`` prints: one text line or one JSON object per event, flushed.

A flag's next step follows its evidence (``| next: …``) and is a ``next_step`` field in
JSON; so does the verdict's. With ``--all`` every line names its server.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from eagle_tui.core.health.changes import Change
from eagle_tui.core.health.snapshot import HealthSnapshot, Verdict
from eagle_tui.core.text import duration


class Output:
    """Prints events as text lines or JSON lines, each flushed at once."""

    def __init__(self, stream: TextIO, *, as_json: bool) -> None:
        self.stream = stream
        self.as_json = as_json

    def emit(self, change: Change, snapshot: HealthSnapshot | None, *, server: str = "") -> None:
        """One event line."""
        elapsed = snapshot.elapsed_s if snapshot is not None else None
        if self.as_json:
            data = {"event": change.kind, "elapsed_s": _round(elapsed), **change.data}
            self._json({**data, "server": server} if server else data)
            return
        who = f"{server} " if server else ""
        text = change.text
        step = change.data.get("next_step")
        if step:
            text += f" | next: {step}"
        self._text(f"[{duration(elapsed):>7}] {who}{text}")

    def say(self, text: str) -> None:
        """An informational line (text mode only)."""
        if not self.as_json:
            self._text(text)

    def final(
        self,
        outcome: str,
        code: int,
        diagnosis: str,
        snapshot: HealthSnapshot | None,
        *,
        next_step: str = "",
    ) -> None:
        """The verdict line."""
        if self.as_json:
            data = {"event": "verdict", "outcome": outcome, "exit_code": code}
            self._json({**data, "diagnosis": diagnosis, **_verdict_extra(snapshot, next_step)})
            return
        step = f" | next step: {next_step}" if next_step else ""
        self._text(f"{outcome.upper()} (exit {code}): {diagnosis}{step}")

    def verdict_of(self, server: str, verdict: Verdict, snapshot: HealthSnapshot | None) -> None:
        """A server's verdict while others are still watched (``--all``)."""
        if self.as_json:
            data = {"event": "verdict", "server": server, "outcome": verdict.outcome.value}
            extra = _verdict_extra(snapshot, verdict.next_step)
            self._json({**data, "diagnosis": verdict.diagnosis, **extra})
            return
        step = f" | next step: {verdict.next_step}" if verdict.next_step else ""
        self._text(f"{server} {verdict.outcome.value.upper()}: {verdict.diagnosis}{step}")

    def _json(self, data: dict[str, Any]) -> None:
        self._text(json.dumps(data, default=str))

    def _text(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()


def _verdict_extra(snapshot: HealthSnapshot | None, next_step: str) -> dict[str, Any]:
    extra: dict[str, Any] = {"next_step": next_step} if next_step else {}
    if snapshot is None:
        return extra
    return {
        **extra,
        "phase": snapshot.phase.value,
        "reached": snapshot.reached.value if snapshot.reached is not None else None,
        "pid": snapshot.process.pid if snapshot.process is not None else None,
        "elapsed_s": _round(snapshot.elapsed_s),
        "ready_after_s": _round(snapshot.ready_after_s),
        "lagging_ranks": list(snapshot.lagging_ranks),
        "unknown_lines": snapshot.unknown_lines,
        "flags": [
            {"flag": f.name, "cause": f.cause or None, "evidence": f.evidence,
             "next_step": f.next_step}
            for f in snapshot.flags
        ],
        **_evidence_extra(snapshot),
    }


def _evidence_extra(snapshot: HealthSnapshot) -> dict[str, Any]:
    """What the processes said (``cause``, one line per process, the stacks)."""
    verdict = snapshot.verdict
    extra: dict[str, Any] = {"cause": verdict.cause or None} if verdict is not None else {}
    if snapshot.evidence is not None:
        extra["processes"] = snapshot.evidence.describe()
    if snapshot.stacks is not None:
        extra["stacks"] = snapshot.stacks.describe()
    return extra


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)

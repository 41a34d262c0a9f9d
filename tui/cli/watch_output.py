"""How ``eagle-tui watch`` prints: one text line or one JSON object per event, flushed.

A flag's next step follows its evidence (``| next: …``) and is a ``next_step`` field in
JSON; so does the verdict's. With ``--all`` every line names its server.

JSON lines: an event is ``{"event", "elapsed_s", …its data…, "server"}`` (the data of each
kind of ``core.health.changes.Change``); the verdict is a ``VerdictLine``. Unset fields are
left out: ``server`` without ``--all``, ``exit_code`` of one server's verdict under
``--all``, ``next_step`` when there is none, the snapshot's fields when there is none; the
verdict's ``cause`` (what the processes say of a stall), one line per process and the
ranks' stacks when the watch saw the server's processes.
"""

from __future__ import annotations

from typing import Any, Literal, TextIO

import msgspec
from msgspec import UNSET, UnsetType

from eagle_tui.core.health.changes import Change
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.snapshot import HealthSnapshot, Verdict
from eagle_tui.core.text import duration
from eagle_tui.core.wire import printable_json


class FlagLine(msgspec.Struct, frozen=True, kw_only=True):
    """A flag raised when the verdict came."""

    flag: str
    cause: str | UnsetType = UNSET  # not written when the flag has none (as before)
    evidence: str
    next_step: str


class VerdictLine(msgspec.Struct, frozen=True, kw_only=True):
    """The verdict: the watch's (``exit_code``), or one server's under ``--all`` (``server``);
    with a snapshot, where the server got to."""

    event: Literal["verdict"] = "verdict"
    server: str | UnsetType = UNSET
    outcome: str
    exit_code: int | UnsetType = UNSET
    diagnosis: str
    next_step: str | UnsetType = UNSET
    phase: Phase | UnsetType = UNSET
    reached: Phase | UnsetType | None = UNSET
    pid: int | UnsetType | None = UNSET
    elapsed_s: float | UnsetType | None = UNSET
    ready_after_s: float | UnsetType | None = UNSET
    lagging_ranks: tuple[str, ...] | UnsetType = UNSET
    unknown_lines: int | UnsetType = UNSET
    flags: tuple[FlagLine, ...] | UnsetType = UNSET
    cause: str | UnsetType = UNSET
    processes: tuple[str, ...] | UnsetType = UNSET
    stacks: str | UnsetType = UNSET

    def seen(self, snapshot: HealthSnapshot | None) -> VerdictLine:
        """This line with where ``snapshot`` says the server got to (unchanged for None)."""
        if snapshot is None:
            return self
        process = snapshot.process
        return msgspec.structs.replace(
            self, phase=snapshot.phase, reached=snapshot.reached,
            pid=process.pid if process is not None else None,
            elapsed_s=_round(snapshot.elapsed_s), ready_after_s=_round(snapshot.ready_after_s),
            lagging_ranks=snapshot.lagging_ranks, unknown_lines=snapshot.unknown_lines,
            flags=tuple(FlagLine(flag=f.name, cause=f.cause or UNSET, evidence=f.evidence,
                                 next_step=f.next_step) for f in snapshot.flags),
            cause=(snapshot.verdict.cause or UNSET) if snapshot.verdict is not None else UNSET,
            processes=tuple(snapshot.evidence.describe()) if snapshot.evidence else UNSET,
            stacks=snapshot.stacks.describe() if snapshot.stacks is not None else UNSET)


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
            line = VerdictLine(outcome=outcome, exit_code=code, diagnosis=diagnosis,
                               next_step=next_step or UNSET)
            self._json(line.seen(snapshot))
            return
        step = f" | next step: {next_step}" if next_step else ""
        self._text(f"{outcome.upper()} (exit {code}): {diagnosis}{step}")

    def verdict_of(self, server: str, verdict: Verdict, snapshot: HealthSnapshot | None) -> None:
        """A server's verdict while others are still watched (``--all``)."""
        if self.as_json:
            line = VerdictLine(server=server, outcome=verdict.outcome.value,
                               diagnosis=verdict.diagnosis,
                               next_step=verdict.next_step or UNSET)
            self._json(line.seen(snapshot))
            return
        step = f" | next step: {verdict.next_step}" if verdict.next_step else ""
        self._text(f"{server} {verdict.outcome.value.upper()}: {verdict.diagnosis}{step}")

    def _json(self, data: dict[str, Any] | VerdictLine) -> None:
        self._text(printable_json(data))

    def _text(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)

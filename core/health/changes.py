"""What changed between two snapshots, as one-line events (for ``watch`` and logs).

Phase changes, flags raised and cleared, new problems, and start-up progress in coarse
steps (every 10 % of shards, every 25 % of a graph-capture pass), so a ten-minute start-up
prints a screenful, not a scroll.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eagle_tui.core.health.evidence import start_not_seen
from eagle_tui.core.health.phase import STARTUP_PHASES, Phase
from eagle_tui.core.health.poller import HealthOutcome
from eagle_tui.core.health.snapshot import HealthSnapshot, StartupProgress
from eagle_tui.core.text import clip, duration


@dataclass(frozen=True)
class Change:
    """One event: ``kind`` (phase, flag, flag_cleared, busy, busy_ended, progress, problem),
    text, JSON data."""

    kind: str
    text: str
    data: Mapping[str, Any] = field(default_factory=dict)


_TIMELINE = (*STARTUP_PHASES, Phase.READY)


def _order(phase: Phase) -> int:
    """Where ``phase`` comes in a start-up; an end (crashed, down, …) after all of it."""
    return _TIMELINE.index(phase) if phase in _TIMELINE else len(_TIMELINE)


def changes(before: HealthSnapshot | None, after: HealthSnapshot) -> list[Change]:
    """The events that turn ``before`` into ``after`` (everything notable when None), in
    the order the log wrote them: progress of a phase the server has since left comes
    before the phase change, progress within the new phase after it."""
    progress = [(Phase.LOADING_WEIGHTS, c) for c in _shard_progress(before, after)]
    progress += [(Phase.CAPTURING_GRAPHS, c) for c in _graph_progress(before, after)]
    left = _order(after.phase)
    return [
        *(c for phase, c in progress if _order(phase) < left),
        *_phase(before, after),
        *(c for phase, c in progress if _order(phase) >= left),
        *_flags(before, after),
        *_busy(before, after),
        *_problems(before, after),
    ]


def _phase(before: HealthSnapshot | None, after: HealthSnapshot) -> list[Change]:
    if before is not None and before.phase == after.phase:
        return []
    detail = phase_detail(after)
    text = f"phase {after.phase}" + (f" ({detail})" if detail else "")
    data = {"phase": after.phase.value, "previous": before.phase.value if before else None}
    return [Change("phase", text, {**data, "detail": detail})]


def phase_detail(s: HealthSnapshot) -> str:
    """A few words on where the phase stands (pid, expected window, figures)."""
    p = s.progress
    if s.phase == Phase.LAUNCHING and s.process is not None:
        return f"PID {s.process.pid}; expected within {duration(s.expected.window_s)}"
    if s.phase == Phase.ALLOCATING_KV and p.weights_gb is not None:
        return f"weights {p.weights_gb:.1f} GB loaded"
    if s.phase == Phase.CAPTURING_GRAPHS and p.kv_tokens is not None:
        return f"KV cache {p.kv_tokens} tokens, {p.kv_size_gb or 0:.1f} GB"
    if s.phase == Phase.READY:
        ok = s.health is not None and s.health.outcome == HealthOutcome.OK
        how = f"/health {s.health.describe()}" if ok and s.health is not None else "log"
        if s.ready_after_s is None:
            return f"{how}; {start_not_seen(s.process)}"
        return f"{how} after {duration(s.ready_after_s)}"
    if s.phase == Phase.CRASHED and s.reached is not None:
        return f"in {s.reached}"
    return ""


def _new_step(before: HealthSnapshot | None, after: HealthSnapshot,
              percent: Callable[[StartupProgress], int | None], step: int) -> bool:
    """Whether ``percent`` of ``after``'s progress reached a new multiple of ``step`` (a
    change worth a line; every percent would flood the list)."""
    now = _bucket(percent(after.progress), step)
    was = _bucket(percent(before.progress), step) if before is not None else None
    return now is not None and now != was


def _bucket(percent: int | None, step: int) -> int | None:
    return None if percent is None else percent // step


def _shard_progress(before: HealthSnapshot | None, after: HealthSnapshot) -> list[Change]:
    new = after.progress
    if not _new_step(before, after, lambda p: p.shards_percent, 10):
        return []
    text = f"loading shards {new.shards_done}/{new.shards_total} ({new.shards_percent}%)"
    data = {"shards_done": new.shards_done, "shards_total": new.shards_total}
    return [Change("progress", text, {**data, "percent": new.shards_percent})]


def _graph_progress(before: HealthSnapshot | None, after: HealthSnapshot) -> list[Change]:
    new = after.progress
    if not _new_step(before, after, lambda p: p.graph_percent, 25):
        return []
    bs = f" (bs={new.graph_batch_size})" if new.graph_batch_size is not None else ""
    text = f"capturing graphs {new.graph_percent}%{bs}"
    data = {"graph_percent": new.graph_percent, "batch_size": new.graph_batch_size}
    return [Change("progress", text, data)]


def _flags(before: HealthSnapshot | None, after: HealthSnapshot) -> list[Change]:
    old = {f.name for f in before.flags} if before is not None else set()
    old_causes = {(f.name, f.cause) for f in before.flags} if before is not None else set()
    new = {f.name for f in after.flags}
    found = [
        Change(
            "flag",
            f"flag {f.name}{_cause(f.cause)}: {f.evidence}",
            {"flag": f.name, "cause": f.cause or None, "evidence": f.evidence,
             "next_step": f.next_step},
        )
        for f in after.flags
        if (f.name, f.cause) not in old_causes  # a stall that becomes specific is news
    ]
    found += [
        Change("flag_cleared", f"flag {name} cleared", {"flag": name}) for name in sorted(old - new)
    ]
    return found


def _busy(before: HealthSnapshot | None, after: HealthSnapshot) -> list[Change]:
    """``busy`` when the processes start working past a silent log's limit, and when not."""
    was = before is not None and before.busy is not None
    now = after.busy
    if now is not None and not was:
        data = {"cause": "busy", "evidence": now.evidence, "next_step": now.next_step}
        return [Change("busy", f"busy: {now.evidence}", data)]
    if now is None and was:
        return [Change("busy_ended", "busy ended", {})]
    return []


def _cause(cause: str) -> str:
    return f" ({cause})" if cause else ""


def _problems(before: HealthSnapshot | None, after: HealthSnapshot) -> list[Change]:
    old = set(before.problems) if before is not None else set()
    return [
        Change("problem", f"problem: {clip(p, 300)}", {"problem": p})
        for p in dict.fromkeys(after.problems)
        if p not in old
    ]

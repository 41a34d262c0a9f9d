"""Run watchers and turn their snapshots into events: the library under ``eagle-tui watch``.

``follow`` ticks one ``Watcher`` and yields what changed (phases, flags with their next
steps, progress, problems), a heartbeat after a minute of nothing new, and finally the
verdict (or a timeout). ``follow_all`` does the same for every SGLang server on this host,
found in the process table (``core.proc.discover``) and again every few seconds, so a
server launched later is picked up; each event names its server.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from eagle_tui.core.clock import Clock
from eagle_tui.core.health.changes import Change, changes
from eagle_tui.core.health.phase import in_phase
from eagle_tui.core.health.snapshot import HealthSnapshot, Outcome, Verdict
from eagle_tui.core.health.watcher import Watcher
from eagle_tui.core.proc.discover import (
    ServerProcess,
    discover_servers,
    held_name,
    shown_log,
)
from eagle_tui.core.text import clip, duration, quote

HEARTBEAT_S = 60.0
PROBLEM_REPEAT_S = 60.0
DISCOVER_EVERY_S = 3.0


@dataclass(frozen=True)
class WatchEvent:
    """One thing to tell: a change, or the final verdict (``final``), of server ``server``."""

    change: Change | None
    snapshot: HealthSnapshot | None
    verdict: Verdict | None = None
    server: str = ""

    @property
    def final(self) -> bool:
        return self.verdict is not None


@dataclass
class _Pacing:
    """When something was last said, so repeats and silences are paced."""

    last_said: float
    problems: dict[str, float] = field(default_factory=dict)

    def fresh_problem(self, text: str, now: float) -> bool:
        if now - self.problems.get(text, float("-inf")) < PROBLEM_REPEAT_S:
            return False
        self.problems[text] = now
        return True


def final_verdict(snapshot: HealthSnapshot, *, keep_watching: bool) -> Verdict | None:
    """The verdict a watch stops on (``keep_watching``: not on ready)."""
    verdict = snapshot.verdict
    if verdict is None or (keep_watching and verdict.outcome == Outcome.READY):
        return None
    return verdict


def timeout_verdict(snapshot: HealthSnapshot, timeout: float) -> Verdict:
    """No verdict before the deadline: say where it stands."""
    parts = [f"no verdict after {duration(timeout)}: still {snapshot.phase}"]
    parts.append(in_phase(snapshot.phase_s))
    if snapshot.last_log_line is not None:
        age = duration(snapshot.last_log_age_s)
        parts.append(f"last log line {age} ago: {quote(snapshot.last_log_line)}")
    if snapshot.flags:
        parts.append("flags: " + ", ".join(f.name for f in snapshot.flags))
    return Verdict(Outcome.TIMEOUT, "; ".join(parts))


def heartbeat(snapshot: HealthSnapshot) -> Change:
    """``still loading_weights (1m05s in phase; last log line 3s ago: …)``."""
    line = f"still {snapshot.phase} ({in_phase(snapshot.phase_s)}"
    if snapshot.last_log_age_s is not None:
        age = duration(snapshot.last_log_age_s)
        line += f"; last log line {age} ago: {clip(snapshot.last_log_line or '', 100)}"
    return Change("heartbeat", line + ")", {"phase": snapshot.phase.value})


async def follow(
    watcher: Watcher,
    *,
    keep_watching: bool = False,
    timeout: float | None = None,
    server: str = "",
) -> AsyncIterator[WatchEvent]:
    """Tick ``watcher`` every poll interval; yield changes, then the verdict, then stop."""
    clock: Clock = watcher.clock
    started = clock.monotonic()
    pacing = _Pacing(last_said=started)
    previous: HealthSnapshot | None = None
    while True:
        # Without a log only /health tells the phase: the first look waits for its answer,
        # or a server that is up would first be reported "launching".
        first_blind = previous is None and watcher.state.log is None
        snapshot = await watcher.tick(await_health=first_blind)
        now = clock.monotonic()
        for change in changes(previous, snapshot):
            if change.kind == "problem" and not pacing.fresh_problem(change.text, now):
                continue
            pacing.last_said = now
            yield WatchEvent(change, snapshot, server=server)
        previous = snapshot
        verdict = final_verdict(snapshot, keep_watching=keep_watching)
        if verdict is None and timeout is not None and now - started >= timeout:
            verdict = timeout_verdict(snapshot, timeout)
        if verdict is not None:
            yield WatchEvent(None, snapshot, verdict, server=server)
            return
        if now - pacing.last_said >= HEARTBEAT_S:
            pacing.last_said = now
            yield WatchEvent(heartbeat(snapshot), snapshot, server=server)
        await clock.sleep(watcher.settings.poll_interval_s)


WatcherFactory = Callable[[ServerProcess], Watcher]


async def follow_all(
    build: WatcherFactory,
    clock: Clock,
    *,
    discover: Callable[[], list[ServerProcess]] = discover_servers,
    every_s: float = DISCOVER_EVERY_S,
) -> AsyncIterator[WatchEvent]:
    """Follow every server found (and found later) until cancelled; events name the server.

    Each server is watched past ready (``keep_watching``), so a crash after ready is told;
    its final verdict comes as an event with ``verdict`` set, and that server's watch ends.
    A server started again is a new process, found by the next scan.
    """
    queue: asyncio.Queue[WatchEvent] = asyncio.Queue()
    tasks: dict[int, asyncio.Task[None]] = {}
    scan = asyncio.create_task(_scan(build, clock, discover, every_s, queue, tasks))
    try:
        while True:
            yield await queue.get()
    finally:
        scan.cancel()
        for task in [scan, *tasks.values()]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _scan(
    build: WatcherFactory,
    clock: Clock,
    discover: Callable[[], list[ServerProcess]],
    every_s: float,
    queue: asyncio.Queue[WatchEvent],
    tasks: dict[int, asyncio.Task[None]],
) -> None:
    while True:
        found = await asyncio.to_thread(discover)
        for server in found:
            if server.pid not in tasks and server.url is not None:
                tasks[server.pid] = asyncio.create_task(_one(build, server, queue))
        await clock.sleep(every_s)


def label(server: ServerProcess) -> str:
    """``:30000 (PID 123)``: what names a server in ``watch --all`` output."""
    return f":{server.port} (PID {server.pid})"


async def _one(build: WatcherFactory, server: ServerProcess, queue: asyncio.Queue[Any]) -> None:
    name = label(server)
    found = Change(
        "server",
        f"found {server.kind} {server.url} PID {server.pid}; log "
        f"{shown_log(server.log_path) if server.log_path else '(not a file: not visible)'}",
        {"kind": server.kind, "url": str(server.url), "pid": server.pid,
         "log": held_name(server.log_path) if server.log_path else str(None)},
    )
    await queue.put(WatchEvent(found, None, server=name))
    watcher = build(server)
    try:
        async for event in follow(watcher, keep_watching=True, server=name):
            await queue.put(event)
    finally:
        await watcher.aclose()

"""Replay a real SGLang log from tests/fixtures/serverlogs through the real watcher.

The log is written to a real file at its own pace (the times its timestamps give, on a
``FakeClock`` so nothing sleeps) or all at once; a real process (``fakeserver.py``) stands
in for the server: it opens its port when the log says uvicorn is running, answers
``/health`` 200 once the log says ready, and exits (or not) as the log's outcome says.
The watcher reads all three through its ordinary sources: ``LogFollower``,
``ProcessProbe`` and ``HealthPoller`` over HTTP.

Times of lines without a timestamp: a tqdm bar update is dated by the bar's own elapsed
time (``[03:52<…]``) from the bar's first line; any other line by the line before it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import re
import shlex
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle_tui.core.health.snapshot import HealthSnapshot
from eagle_tui.core.health.watcher import Watcher
from support.clock import FakeClock

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "serverlogs"
FAKESERVER = Path(__file__).with_name("fakeserver.py")

_FULL = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,6}))?")
_MONTH_DAY = re.compile(r"\b(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})\b")
_GLOG = re.compile(r"(?:^|\[)[IWEF](\d{1,2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.\d+")
_TIME_ONLY = re.compile(r"\[(\d{2}):(\d{2}):(\d{2})[ \]]")
_BAR = re.compile(r"^(.*?)\s*\d{1,3}%.*?\|\s*(\d+)/(\d+) \[(?:(\d+):)?(\d+):(\d+)<")
_KILLED = re.compile(r"^\s*(?:Killed|已杀死)\s*$")


@dataclass(frozen=True)
class CorpusLog:
    """One corpus log: its lines (split on ``\\n`` only), annotations and metadata."""

    name: str
    path: Path
    meta: dict[str, Any]
    lines: tuple[str, ...]
    kinds: dict[int, str]

    @property
    def outcome(self) -> str:
        return str(self.meta["outcome"])

    def __repr__(self) -> str:
        return self.name


def load_corpus(root: Path = FIXTURES) -> list[CorpusLog]:
    """Every log listed in ``corpus.toml``, in file order."""
    entries = tomllib.loads((root / "corpus.toml").read_text(encoding="utf-8"))["log"]
    found = []
    for entry in entries:
        path = root / entry["file"]
        lines = path.read_bytes().decode("utf-8").split("\n")  # keep tqdm's \r
        if lines and lines[-1] == "":
            lines.pop()
        kinds = {}
        for row in path.with_suffix(".expect.txt").read_text(encoding="utf-8").splitlines():
            number, kind = row.split("\t")
            kinds[int(number)] = kind
        found.append(CorpusLog(path.stem, path, entry, tuple(lines), kinds))
    return found


def _stamp(text: str, last_date: dt.date) -> dt.datetime | None:
    head = text[:120]
    if m := _FULL.search(head):
        y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
        micro = int((m[7] or "0").ljust(6, "0")[:6])
        return dt.datetime(y, mo, d, h, mi, s, micro)
    if m := _MONTH_DAY.search(head) or _GLOG.search(head):
        mo, d, h, mi, s = (int(g) for g in m.groups())
        return dt.datetime(last_date.year, mo, d, h, mi, s)
    if m := _TIME_ONLY.search(head):
        h, mi, s = (int(g) for g in m.groups())
        return dt.datetime.combine(last_date, dt.time(h, mi, s))
    return None


def _first_date(lines: tuple[str, ...], default: dt.date) -> dt.date:
    """The first full date in the log: the year and day of stamps that lack them."""
    for text in lines:
        if m := _FULL.search(text[:120]):
            return dt.date(int(m[1]), int(m[2]), int(m[3]))
    for text in lines:
        if m := _MONTH_DAY.search(text[:120]):
            return dt.date(default.year, int(m[1]), int(m[2]))
    return default


def line_times(lines: tuple[str, ...], base: dt.date = dt.date(2024, 9, 1)) -> list[float]:
    """Seconds since the first line for every line (non-decreasing)."""
    times: list[float] = []
    bars: dict[str, float] = {}
    last_date, origin, previous = _first_date(lines, base), None, 0.0
    for text in lines:
        segment = text.split("\r")[-1] or text
        stamp = _stamp(segment, last_date)
        at = previous
        if stamp is not None:
            if origin is not None and stamp.timestamp() < origin + previous - 43_200:
                stamp += dt.timedelta(days=1)  # a time-only stamp passed midnight
            last_date = stamp.date()
            origin = stamp.timestamp() if origin is None else origin
            at = stamp.timestamp() - origin
        elif bar := _BAR.search(segment.strip()):
            elapsed = int(bar[4] or 0) * 3600 + int(bar[5]) * 60 + int(bar[6])
            label = bar[1].strip()
            if elapsed == 0 or label not in bars:
                bars[label] = previous - elapsed
            at = bars[label] + elapsed
        previous = max(previous, at)
        times.append(previous)
    return times


class FakeServerProcess:
    """``fakeserver.py`` as a child process; commands go to its stdin."""

    def __init__(self, *marker_args: str) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, str(FAKESERVER), *marker_args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.popen.stdout is not None
        line = self.popen.stdout.readline()
        assert line.startswith("READY"), f"fake server did not start: {line!r}"
        self.listening = False

    @property
    def pid(self) -> int:
        return self.popen.pid

    def send(self, command: str) -> None:
        """Send a command and wait for its acknowledgement (none after exit/signal)."""
        assert self.popen.stdin is not None and self.popen.stdout is not None
        if self.popen.poll() is not None:
            return
        self.popen.stdin.write(command + "\n")
        self.popen.stdin.flush()
        if command.startswith(("exit", "signal")):
            self.popen.wait(timeout=10)
            return
        self.popen.stdout.readline()

    def exit_code(self) -> int | None:
        return self.popen.poll()

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.popen.kill()
        self.popen.wait(timeout=10)
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def command_args(log: CorpusLog) -> list[str]:
    """The stand-in's arguments: the log's launch command when the source quotes it."""
    command = shlex.split(str(log.meta.get("command", "")))
    if "sglang.launch_server" in command:
        return ["-m", *command[command.index("sglang.launch_server") :]]
    return ["-m", "sglang.launch_server"]


def server_commands(text: str, server: FakeServerProcess, port: int) -> list[str]:
    """What the stand-in process does when the log shows ``text`` (port open, ready)."""
    commands = []
    opens = "Uvicorn running on" in text or re.search(r'"(GET|POST) /\S* HTTP', text)
    ready = "The server is fired up and ready to roll!" in text
    if (opens or ready) and not server.listening:
        commands.append(f"listen {port}")
        server.listening = True
    if ready:
        commands.append("health 200")
    return commands


def exit_plan(log: CorpusLog) -> tuple[str, ...]:
    """How the stand-in process ends once the log is written (the log's outcome)."""
    if log.outcome in ("stopped", "port_conflict"):
        return ("signal 15",)  # a port conflict: SGLang stays up until someone stops it
    if log.outcome == "crashed":
        killed = any(_KILLED.match(line) for line in log.lines)
        return ("signal 9",) if killed else ("exit 1",)
    return ()


@dataclass
class Replay:
    """What the watcher said while one log was replayed (times: fake seconds from start)."""

    log: CorpusLog
    snapshots: list[tuple[float, HealthSnapshot]] = field(default_factory=list)
    last_line_at: float = 0.0
    exited_at: float | None = None

    @property
    def final(self) -> HealthSnapshot:
        return self.snapshots[-1][1]

    def first(self, test: Callable[[HealthSnapshot], bool]) -> tuple[float, HealthSnapshot] | None:
        return next(((t, s) for t, s in self.snapshots if test(s)), None)

    def before_exit(self) -> HealthSnapshot:
        """The last snapshot taken while the process was still alive."""
        alive = [s for t, s in self.snapshots if self.exited_at is None or t < self.exited_at]
        return alive[-1] if alive else self.snapshots[0][1]

    def phases_seen(self) -> list[str]:
        seen: list[str] = []
        for _, snapshot in self.snapshots:
            if not seen or seen[-1] != snapshot.phase.value:
                seen.append(snapshot.phase.value)
        return seen


WatcherFactory = Callable[[Path, FakeClock, FakeServerProcess, int], Watcher]


async def replay(
    log: CorpusLog,
    workdir: Path,
    build: WatcherFactory,
    *,
    port: int,
    poll_s: float = 1.0,
    stall_wait_s: float = 1800.0,
    crash_quiet_s: float = 30.0,
) -> Replay:
    """Write ``log`` at its own pace and tick the watcher every ``poll_s`` (fake) seconds.

    Long silences are ticked every second for two minutes, then every ten seconds. After the
    last line: a ready log gets five more seconds; a stalled one is watched until a stall
    flag (or ``stall_wait_s``); a crashed one ``crash_quiet_s`` with the process alive, then
    the process exits as the log says and the watch goes on for ten seconds.
    """
    path = workdir / f"{log.name}.log"
    path.write_bytes(b"")
    server = FakeServerProcess(*command_args(log), "--port", str(port))
    clock = FakeClock(wall_start=time.time())
    result = Replay(log)
    watcher = build(path, clock, server, port)
    start = clock.monotonic()
    try:
        times = line_times(log.lines)
        await _write_paced(log, times, path, clock, watcher, server, port, poll_s, result, start)
        result.last_line_at = times[-1] if times else 0.0
        await _after_last_line(log, clock, watcher, server, poll_s, result, start,
                               stall_wait_s, crash_quiet_s)
    finally:
        await watcher.aclose()
        server.close()
    return result


async def _tick(watcher: Watcher, clock: FakeClock, result: Replay, start: float) -> None:
    snapshot = await watcher.tick(await_health=True)
    result.snapshots.append((clock.monotonic() - start, snapshot))


async def _advance_to(target: float, clock: FakeClock, watcher: Watcher, result: Replay,
                      start: float, poll_s: float, quiet_since: float) -> None:
    """Tick on the poll grid until ``target`` (a ten-times coarser grid after two minutes of
    silence: stall limits are shorter than that, so flags are still timed to the poll)."""
    while True:
        now = clock.monotonic() - start
        step = poll_s if now - quiet_since < 120 else 10 * poll_s
        next_tick = (math.floor(now / step + 1e-9) + 1) * step
        if next_tick > target + 1e-9:
            break
        clock.advance(next_tick - now)
        await _tick(watcher, clock, result, start)
    clock.advance(max(0.0, target - (clock.monotonic() - start)))


async def _write_paced(log: CorpusLog, times: list[float], path: Path, clock: FakeClock,
                       watcher: Watcher, server: FakeServerProcess, port: int, poll_s: float,
                       result: Replay, start: float) -> None:
    index = 0
    quiet_since = 0.0
    while index < len(log.lines):
        at = times[index]
        await _advance_to(at, clock, watcher, result, start, poll_s, quiet_since)
        group = []
        while index < len(log.lines) and times[index] == at:
            group.append(log.lines[index])
            index += 1
        with open(path, "a", encoding="utf-8", newline="") as out:
            out.write("".join(line + "\n" for line in group))
        for text in group:
            for command in server_commands(text, server, port):
                server.send(command)
        quiet_since = at


async def _after_last_line(log: CorpusLog, clock: FakeClock, watcher: Watcher,
                           server: FakeServerProcess, poll_s: float, result: Replay,
                           start: float, stall_wait_s: float, crash_quiet_s: float) -> None:
    last = result.last_line_at
    if log.outcome == "ready":
        await _advance_to(last + 5, clock, watcher, result, start, poll_s, last)
        return
    if log.outcome == "stalled":
        deadline = last + stall_wait_s
        while clock.monotonic() - start < deadline:
            await _advance_to(clock.monotonic() - start + poll_s, clock, watcher, result,
                              start, poll_s, last)
            if result.snapshots and result.snapshots[-1][1].flag("stalled") is not None:
                return
        return
    if log.outcome in ("crashed", "port_conflict"):
        await _advance_to(last + crash_quiet_s, clock, watcher, result, start, poll_s, last)
    for command in exit_plan(log):
        server.send(command)
    result.exited_at = clock.monotonic() - start
    await _advance_to(result.exited_at + 10, clock, watcher, result, start, poll_s,
                      result.exited_at)


def write_at_once(log: CorpusLog, path: Path, *, mtime: float | None = None) -> None:
    """The whole log in one write (an attach to a server that logged it earlier)."""
    path.write_text("".join(line + "\n" for line in log.lines), encoding="utf-8")
    if mtime is not None:
        os.utime(path, (mtime, mtime))


async def replay_at_once(
    log: CorpusLog,
    workdir: Path,
    build: WatcherFactory,
    *,
    port: int,
    age_s: float = 0.0,
    poll_s: float = 1.0,
    watch_s: float = 20.0,
) -> Replay:
    """The whole log already written ``age_s`` ago (a watch attaching late), the process
    alive and its port as the log left it; ``watch_s`` of ticks, then the process ends as
    the log says and ten more seconds."""
    path = workdir / f"{log.name}.log"
    server = FakeServerProcess(*command_args(log), "--port", str(port))
    clock = FakeClock(wall_start=time.time())
    result = Replay(log)
    for text in log.lines:
        for command in server_commands(text, server, port):
            server.send(command)
    write_at_once(log, path, mtime=clock.wall() - age_s)
    watcher = build(path, clock, server, port)
    start = clock.monotonic()
    try:
        await _advance_to(watch_s, clock, watcher, result, start, poll_s, 0.0)
        for command in exit_plan(log):
            server.send(command)
        result.exited_at = clock.monotonic() - start
        await _advance_to(watch_s + 10, clock, watcher, result, start, poll_s, watch_s)
    finally:
        await watcher.aclose()
        server.close()
    return result


def watch_like_the_verb(
    path: Path, clock: FakeClock, server: FakeServerProcess, port: int
) -> Watcher:
    """The watcher ``eagle-tui watch --url … --log … --pid …`` builds (default settings,
    no history), on the fake clock; we are the stand-in's parent, so its exit code is known.
    Without process evidence: the stand-in only writes the log, its quiet CPU says nothing
    of the server that wrote it (the corpus measures what the log alone tells)."""
    from eagle_tui.core.health.assemble import WatchOptions, build_watcher
    from eagle_tui.core.urls import ServerURL

    options = WatchOptions(url=ServerURL("http", "127.0.0.1", port), log_path=path,
                           pid=server.pid, use_history=False, gpu=False,
                           evidence=False)
    watcher = build_watcher(options, clock=clock)
    assert watcher.probe is not None
    watcher.probe._exit_code = server.exit_code
    return watcher

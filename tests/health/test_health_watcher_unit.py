"""The watcher loop with files the test writes and sources that fail, on a fake clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

import health_fakes as f
import pytest
from support.clock import FakeClock

from eagle_tui.core.health.changes import changes
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.poller import HealthPoller
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import Outcome
from eagle_tui.core.health.state import WatchState
from eagle_tui.core.health.watcher import Watcher
from eagle_tui.core.proc.probe import ProcessProbe
from eagle_tui.core.proc.report import GpuReport
from eagle_tui.core.serverlog.follower import LogFollower
from eagle_tui.core.sglang.types import HealthResult


class BrokenProbe(ProcessProbe):
    def probe(self):  # type: ignore[no-untyped-def]
        raise RuntimeError("psutil exploded")


def broken_gpu() -> GpuReport:
    raise OSError("NVML went away")


def write(path: Path, *lines: str, mode: str = "a") -> None:
    with open(path, mode, encoding="utf-8") as out:
        out.write("".join(line + "\n" for line in lines))


def make_watcher(log: Path, clock: FakeClock, check: object, **kw: object) -> Watcher:
    settings = WatchSettings(poll_interval_s=1.0)
    state = WatchState(
        settings,
        has_log=True,
        has_process=kw.get("probe") is not None,
        launched_at=clock.monotonic(),
        date_backlog=False,
    )
    poller = HealthPoller(check, clock=clock, interval_s=1.0, timeout_s=0.5)  # type: ignore[arg-type]
    return Watcher(state, clock=clock, log=LogFollower(log, from_start=True), poller=poller, **kw)  # type: ignore[arg-type]


async def refused(timeout: float) -> HealthResult:
    from eagle_tui.core.errors import ServerUnreachable

    raise ServerUnreachable("refused")


async def test_failing_sources_become_problems_not_exceptions(tmp_path: Path) -> None:
    async def garbage(timeout: float) -> HealthResult:
        raise ValueError("b'\\x00\\xff' is not a health answer")

    clock = FakeClock()
    (tmp_path / "server.log").mkdir()  # unreadable as a log
    watcher = make_watcher(
        tmp_path / "server.log", clock, garbage, probe=BrokenProbe(100), gpu_reader=broken_gpu
    )
    snapshot = await watcher.tick(await_health=True)
    text = " | ".join(snapshot.problems)
    assert "process probe failed: RuntimeError: psutil exploded" in text
    assert "GPU failed: OSError: NVML went away" in text
    assert "/health: ValueError" in text
    assert "cannot read" in text
    await watcher.aclose()


async def test_a_bug_in_the_state_machine_is_reported_and_the_loop_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    watcher = make_watcher(tmp_path / "server.log", clock, refused)
    first = await watcher.tick(await_health=True)

    def explode(observation: object) -> None:
        raise KeyError("oops")

    monkeypatch.setattr(watcher.state, "update", explode)
    second = await watcher.tick(await_health=True)
    assert second.phase == first.phase
    assert any("internal error while judging: KeyError" in p for p in second.problems)
    await watcher.aclose()


async def test_run_loop_on_a_fake_clock_until_ready_with_truncation_midway(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    write(log, f.ARGS, *f.BEGIN, mode="w")
    answers = [HealthResult(503, 0.0)] * 2 + [HealthResult(200, 0.0)] * 10
    started = asyncio.Event()

    async def check(timeout: float) -> HealthResult:
        if not started.is_set():
            from eagle_tui.core.errors import ServerUnreachable

            raise ServerUnreachable("refused")
        return answers.pop(0)

    clock = FakeClock()
    watcher = make_watcher(log, clock, check)
    seen: list[Phase] = []
    loop = asyncio.create_task(
        watcher.run(lambda s: seen.append(s.phase), until=lambda s: s.verdict is not None)
    )

    async def step(*lines: str, mode: str = "a") -> None:
        if lines:
            write(log, *lines, mode=mode)
        while clock.sleepers == 0 and not loop.done():  # let the loop tick and park
            await asyncio.sleep(0)
        await watcher.poller.wait_idle()  # type: ignore[union-attr]
        clock.advance(1.0)

    await step()
    await step(*f.WEIGHTS_END, *f.KV)
    await step("logrotate copytruncate happened here", mode="w")  # truncated, then written
    await step(*f.GRAPH_BEGIN)
    started.set()
    await step(*f.GRAPH_END, *f.UVICORN)
    await step()
    await step()
    snapshot = await asyncio.wait_for(loop, 5)
    assert snapshot.verdict is not None and snapshot.verdict.outcome == Outcome.READY
    order = [p for i, p in enumerate(seen) if i == 0 or seen[i - 1] != p]
    assert order == [
        Phase.LOADING_WEIGHTS,
        Phase.ALLOCATING_KV,
        Phase.CAPTURING_GRAPHS,
        Phase.WARMING_UP,
        Phase.READY,
    ]
    await watcher.aclose()


def test_changes_report_phases_progress_flags_and_problems_once() -> None:
    d = f.Driver()
    first = d.tick(f.chunk(f.ARGS, *f.BEGIN), f.alive())
    events = changes(None, first)
    assert [e.kind for e in events] == ["phase"]
    second = d.tick(
        f.chunk(partial=f.SHARD.format(pct=50, done=32)), f.alive(), problems=("log hiccup",)
    )
    kinds = [(e.kind, e.text) for e in changes(first, second)]
    assert ("progress", "loading shards 32/64 (50%)") in kinds
    assert ("problem", "problem: log hiccup") in kinds
    d.advance(400)
    third = d.tick(f.chunk(), f.alive())
    texts = [e.text for e in changes(second, third)]
    assert any(t.startswith("flag stalled: no log progress") for t in texts)
    assert changes(third, third) == []
    d.tick(f.chunk(f.WEIGHTS_END[0]), f.alive())
    fourth = d.tick(f.chunk(), f.alive())
    assert any(
        e.kind == "flag_cleared" and e.data["flag"] == "stalled" for e in changes(third, fourth)
    )

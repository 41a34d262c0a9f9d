"""Every real log of tests/fixtures/serverlogs through the real watcher, once, against what a
person reads in it (corpus.toml: outcome, phase, cause, lagging ranks).

Stalled logs are written at their own pace (times matter: a hang is flagged within a minute
of its last line); every other log all at once, as a watch attaching after the fact sees it,
with the stand-in process alive until the diagnosis (a crash is read from the log alone) and
then ending as the log says. See tests/support/replay.py. That a slow start-up still moving
is never called a stall is asserted tick by tick in test_health_state.py and
test_health_verdicts.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.replay import (
    CorpusLog,
    Replay,
    load_corpus,
    replay,
    replay_at_once,
    watch_like_the_verb,
)

from eagle_tui.core.health.snapshot import HealthSnapshot
from eagle_tui.core.sim.launcher import free_port

pytestmark = pytest.mark.slow

CORPUS = load_corpus()
PACED = [log for log in CORPUS if log.outcome == "stalled"]
AT_ONCE = [log for log in CORPUS if log.outcome != "stalled"]


def _normal(text: str) -> str:
    return " ".join(re.sub(r"^\[[^\]]*\]\s*", "", text.strip()).split())


def cause_in(log: CorpusLog, snapshot: HealthSnapshot) -> bool:
    assert snapshot.verdict is not None
    return _normal(str(log.meta["cause"]))[:60] in " ".join(snapshot.verdict.diagnosis.split())


def assert_read_as_a_person_reads_it(log: CorpusLog, result: Replay) -> None:
    final = result.final
    assert final.verdict is not None, f"{log.name}: no verdict ({final.phase}, {final.flags})"
    assert final.verdict.outcome.value == log.outcome, final.verdict.diagnosis
    assert final.reached is not None and final.reached.value == log.meta["phase"]
    if log.outcome != "ready":
        assert cause_in(log, final), final.verdict.diagnosis
    assert set(final.lagging_ranks) == set(log.meta["lagging_ranks"])


@pytest.mark.parametrize("log", PACED, ids=lambda log: log.name)
async def test_a_stall_replayed_at_its_own_pace_is_flagged_within_a_minute(
    log: CorpusLog, tmp_path: Path
) -> None:
    result = await replay(log, tmp_path, watch_like_the_verb, port=free_port(), stall_wait_s=300)
    assert_read_as_a_person_reads_it(log, result)
    stalls = result.first(lambda s: s.flag("stalled") is not None)
    assert stalls is not None
    assert stalls[0] - result.last_line_at <= 60.0  # flagged within a minute of its last line
    assert stalls[1].flag("stalled").next_step  # type: ignore[union-attr]


@pytest.mark.parametrize("log", AT_ONCE, ids=lambda log: log.name)
async def test_replay_written_at_once(log: CorpusLog, tmp_path: Path) -> None:
    result = await replay_at_once(log, tmp_path, watch_like_the_verb, port=free_port())
    assert_read_as_a_person_reads_it(log, result)
    early = result.before_exit().verdict
    assert early is not None and early.outcome.value == log.outcome  # from the log alone
    if log.outcome in ("crashed", "port_conflict"):
        assert early.next_step
    assert result.final.unknown_lines <= len(log.lines)

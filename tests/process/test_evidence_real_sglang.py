"""The process evidence and py-spy stacks on a real SGLang 0.5.23 (CPU) made to hang for real:
node 0 of 2 with no node 1, a weight shard that is a named pipe nobody writes, a scheduler
SIGSTOPped after ``Load weight begin``, and a plain start that must show nothing stuck.

Each server is started by ``scripts/realsglang/hang.py`` (the same script a person uses to
reproduce it). Skipped unless ``EAGLE_REAL_SGLANG_VENV`` is a venv with SGLang and
``EAGLE_REAL_SGLANG_MODEL`` a model it serves on the CPU (``scripts/realsglang/realsglang.sh
install`` and ``model script`` make both). Ports come from the OS.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.waiting import wait_until

from eagle_tui.core.proc import pyspy
from eagle_tui.core.proc.evidence import ProcessEvidence, State, TreeEvidence
from eagle_tui.core.proc.sampler import EvidenceSampler
from eagle_tui.core.proc.stacks import RankPlace, classify, describe_folds, fold
from eagle_tui.core.proc.stuckpoints import Point

VENV = os.environ.get("EAGLE_REAL_SGLANG_VENV")
MODEL = os.environ.get("EAGLE_REAL_SGLANG_MODEL")
HANG = Path(__file__).resolve().parents[2] / "scripts" / "realsglang" / "hang.py"
START_S = 900.0  # a loaded 2-core machine takes minutes to import SGLang

pytestmark = [
    pytest.mark.slow,
    pytest.mark.realsglang,
    pytest.mark.skipif(
        not (VENV and MODEL), reason="set EAGLE_REAL_SGLANG_VENV and EAGLE_REAL_SGLANG_MODEL"
    ),
]

Start = Callable[[str], dict[str, Any]]


@pytest.fixture
def hang(tmp_path: Path) -> Iterator[Start]:
    workdirs: list[Path] = []

    def start(case: str) -> dict[str, Any]:
        workdir = tmp_path / case
        workdirs.append(workdir)
        done = subprocess.run(
            [sys.executable, str(HANG), "start", case, "--venv", str(VENV), "--model",
             str(MODEL), "--workdir", str(workdir), "--timeout", str(START_S)],
            capture_output=True, text=True, timeout=START_S + 60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        info: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
        info["ready_at"] = time.monotonic()
        return info

    yield start
    for workdir in workdirs:
        subprocess.run([sys.executable, str(HANG), "stop", "--workdir", str(workdir)], timeout=60)


def sample_until(
    sampler: EvidenceSampler, condition: Callable[[TreeEvidence], bool], timeout: float, what: str
) -> TreeEvidence:
    """Sample once a second, as the watcher does, until ``condition`` holds."""
    seen: list[TreeEvidence] = []

    def look() -> bool:
        if seen and time.monotonic() - seen[-1].at < 1.0:
            return False
        seen.append(sampler.sample(time.monotonic()))
        return condition(seen[-1])

    wait_until(look, timeout, f"{what}; last sample: {seen[-1].describe() if seen else None}")
    return seen[-1]


def rank(evidence: TreeEvidence) -> ProcessEvidence:
    (scheduler,) = evidence.ranks
    return scheduler


def place_of(proc: ProcessEvidence) -> RankPlace:
    stack = pyspy.dump(proc.pid)
    assert stack.ok, f"{stack.status}: {stack.message}"
    wait = proc.blocked.syscall if proc.blocked else None
    return RankPlace(proc.label, proc.pid, classify(stack, wait))


def test_node_0_without_node_1_waits_for_peers_naming_the_address(hang: Start) -> None:
    info = hang("peers")
    sampler = EvidenceSampler(info["pid"])
    evidence = sample_until(
        sampler, lambda e: e.peers is not None and e.peers.hosts_store and e.peers.joined >= 1,
        60, "the store listening with node 0's rank connected",
    )  # fmt: skip
    assert time.monotonic() - info["ready_at"] < 60
    peers = evidence.peers
    assert peers is not None and (peers.joined, peers.missing, peers.missing_nodes()) == (
        1,
        1,
        (1,),
    )
    assert peers.describe() == (
        f"distributed init {info['dist_addr']}: this node hosts the store; 1 of 2 ranks "
        "connected; missing node 1 (rank 1)"
    )
    tp0 = rank(evidence)
    assert tp0.label == "TP0" and tp0.state is State.SLEEPING
    place = place_of(tp0)
    assert place.place is not None and place.place.point is Point.PEERS
    assert "distributed init" in place.place.path
    print(describe_folds(fold([place])))


def test_a_weight_shard_that_is_a_fifo_blocks_the_rank_naming_the_file(hang: Start) -> None:
    info = hang("fifo")
    sampler = EvidenceSampler(info["pid"])

    def blocked_on_the_fifo(e: TreeEvidence) -> bool:
        """Blocked, on a sample with rates: the rank can block before the sampler first sees
        it (a loaded machine), and a rate needs two looks at the same process."""
        ranks = e.ranks
        return (
            bool(ranks) and ranks[0].blocked is not None and ranks[0].blocked.path == info["fifo"]
            and ranks[0].read_per_s is not None
        )

    evidence = sample_until(sampler, blocked_on_the_fifo, 60, "the rank blocked on the fifo")
    assert time.monotonic() - info["ready_at"] < 60
    scheduler = rank(evidence)
    call = scheduler.blocked
    assert call is not None and call.syscall == "openat"
    assert call.meaning == "opening a FIFO that no process writes"
    assert scheduler.read_per_s == 0 and scheduler.disk_read_per_s == 0
    place = place_of(scheduler)
    assert place.place is not None and place.place.point is Point.WEIGHTS
    assert place.place.detail == "model.safetensors"
    assert place.place.path[-2:] == ("load_model", "load_weights")
    print(scheduler.describe(), describe_folds(fold([place])))


def test_a_scheduler_stopped_after_load_weight_begin_reads_as_stopped_naming_it(
    hang: Start,
) -> None:
    info = hang("stop")
    sampler = EvidenceSampler(info["pid"])
    evidence = sample_until(
        sampler, lambda e: any(p.state is State.STOPPED for p in e.ranks), 15, "a stopped rank"
    )
    assert time.monotonic() - info["ready_at"] < 15
    (stopped,) = evidence.in_state(State.STOPPED)
    assert stopped.pid == info["stopped_pid"] and stopped.label == "scheduler"
    assert stopped.role.title == "sglang::scheduler"
    stack = pyspy.dump(stopped.pid)  # a stopped process is read without pausing it
    assert stack.ok and stack.nonblocking
    assert (Path(f"/proc/{stopped.pid}/stat").read_text().rpartition(")")[2].split()[0]) == "T"


def test_a_plain_start_shows_nothing_stuck(hang: Start) -> None:
    info = hang("plain")
    sampler = EvidenceSampler(info["pid"])
    sampler.sample(time.monotonic())
    evidence = sample_until(sampler, lambda e: e.interval_s is not None, 10, "a second sample")
    assert evidence.peers is None
    assert not evidence.in_state(State.STOPPED, State.TRACING_STOP, State.DISK_WAIT, State.ZOMBIE)
    assert not evidence.compilers
    assert [p.label for p in evidence.processes][:1] == ["launcher"]
    assert {"scheduler", "detokenizer"} <= {p.label for p in evidence.processes}
    for proc in evidence.processes:
        assert proc.blocked is None or proc.blocked.meaning in (
            "waiting for events", "waiting on a lock or condition", "sleeping",
            "reading a pipe", "waiting on a pipe",
        ), proc.describe()  # fmt: skip
    places = [place_of(p) for p in evidence.processes if p.role.kind.value != "other"]
    for item in places:
        assert item.place is not None and not item.place.stuck, item
    print(describe_folds(fold(places)))

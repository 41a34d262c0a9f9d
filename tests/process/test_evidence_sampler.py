"""The evidence sampler against real process trees: a reader whose position moves, one
whose position stopped, a rank blocked opening a named pipe, a stopped rank, a compiler child
burning CPU, a rendezvous store with one rank of two connected, and GPU memory from a fake
NVML report."""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.processes import kill_tree
from support.waiting import wait_until

from eagle_tui.core.proc.evidence import FileKind, State, TreeEvidence
from eagle_tui.core.proc.peers import DistInit
from eagle_tui.core.proc.report import GpuDevice, GpuProcess, GpuReport
from eagle_tui.core.proc.sampler import EvidenceSampler
from eagle_tui.core.proc.titles import Kind

pytestmark = pytest.mark.slow

# A parent that starts the children named on its command line and reports their PIDs.
PARENT = r"""
import subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", code]) for code in sys.argv[1:]]
print(" ".join(str(k.pid) for k in kids), flush=True)
time.sleep(600)
"""
READER = """
import time
f = open({path!r}, "rb")
while True:
    f.read(65536)
    time.sleep(0.02)
"""
STALLED = """
import time
f = open({path!r}, "rb", buffering=0)
f.read({count})
time.sleep(600)
"""
FIFO_OPENER = "open({path!r}, 'rb')"
SLEEPER = "import time; time.sleep(600)"
BUSY = "while True: pass"


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[object]:
    started: list[subprocess.Popen[str]] = []

    def start(*codes: str, executable: str = sys.executable) -> tuple[int, list[int]]:
        popen = subprocess.Popen([executable, "-c", PARENT, *codes], stdout=subprocess.PIPE,
                                 text=True)  # fmt: skip
        started.append(popen)
        assert popen.stdout is not None
        kids = [int(p) for p in popen.stdout.readline().split()]
        return popen.pid, kids

    yield start
    for popen in started:
        kill_tree([popen.pid])
        popen.wait(timeout=10)
        if popen.stdout is not None:
            popen.stdout.close()


def weights(tmp_path: Path, name: str, size: int) -> Path:
    path = tmp_path / name
    path.write_bytes(os.urandom(size))
    return path


def sample_until(sampler: EvidenceSampler, condition: object, what: str) -> TreeEvidence:
    """Sample every quarter second (rates over shorter intervals flicker) until
    ``condition(evidence)`` holds."""
    found: list[TreeEvidence] = []

    def look() -> bool:
        if found and time.monotonic() - found[-1].at < 0.25:
            return False
        found.append(sampler.sample(time.monotonic()))
        return bool(condition(found[-1]))  # type: ignore[operator]

    wait_until(look, 60, what)
    return found[-1]


def test_a_reader_moves_and_a_stalled_read_shows_its_position_and_how_long_it_stood(
    tree: object, tmp_path: Path
) -> None:
    moving = weights(tmp_path, "model-00001-of-00002.safetensors", 64 << 20)
    stuck = weights(tmp_path, "model-00002-of-00002.safetensors", 1000 << 10)
    root, (reader, stalled) = tree(  # type: ignore[operator]
        READER.format(path=str(moving)), STALLED.format(path=str(stuck), count=370 << 10)
    )
    sampler = EvidenceSampler(root)

    def ready(e: TreeEvidence) -> bool:
        files = [f for p in e.processes for f in p.files]
        return (
            any(f.name == moving.name and f.bytes_per_s for f in files)
            and any(f.name == stuck.name and f.position == 370 << 10 and f.still_s >= 1.0
                    for f in files)
        )  # fmt: skip

    evidence = sample_until(sampler, ready, "a moving and a stalled read")
    by_pid = {p.pid: p for p in evidence.processes}
    assert by_pid[root].role.kind is Kind.LAUNCHER and by_pid[reader].depth == 1
    moving_file = next(f for f in by_pid[reader].files if f.name == moving.name)
    assert moving_file.kind is FileKind.WEIGHTS and moving_file.bytes_per_s
    assert by_pid[reader].read_per_s and by_pid[reader].read_per_s > 100_000
    still = next(f for f in by_pid[stalled].files if f.name == stuck.name)
    assert still.bytes_per_s == 0 and still.size == 1000 << 10 and round(still.percent or 0) == 37
    # it stood before the sampler's first look: how long is not known, so not said (issue 38)
    assert not still.still_known
    assert still.describe() == "reading model-00002-of-00002.safetensors, 37 %, 0 B/s"
    longer = dataclasses.replace(still, still_s=40.0)
    assert longer.describe().endswith("0 B/s for at least 40s")
    assert dataclasses.replace(still, still_known=True).describe().endswith("0 B/s for 1s")
    assert by_pid[stalled].quiet_s > 0 and by_pid[stalled].cpu_per_s is not None


def test_a_rank_blocked_opening_a_named_pipe_names_the_file_and_a_stopped_one_says_stopped(
    tree: object, tmp_path: Path
) -> None:
    fifo = tmp_path / "model.safetensors"
    os.mkfifo(fifo)
    root, (opener, sleeper) = tree(FIFO_OPENER.format(path=str(fifo)), SLEEPER)  # type: ignore[operator]
    os.kill(sleeper, signal.SIGSTOP)
    sampler = EvidenceSampler(root)

    def blocked_a_while(e: TreeEvidence) -> bool:
        p = e.by_pid(opener)
        return p is not None and p.blocked is not None and p.blocked.since_s >= 1.0

    evidence = sample_until(sampler, blocked_a_while, "the opener blocked for a second")
    call = evidence.by_pid(opener).blocked  # type: ignore[union-attr]
    assert call is not None
    assert (call.syscall, call.path, call.wchan) == ("openat", str(fifo), "wait_for_partner")
    assert call.meaning == "opening a FIFO that no process writes"
    assert call.describe().startswith(f"blocked in openat({fifo}): opening a FIFO")
    stopped = evidence.by_pid(sleeper)
    assert stopped is not None and stopped.state is State.STOPPED
    assert evidence.in_state(State.STOPPED) == (stopped,)
    os.kill(sleeper, signal.SIGCONT)


def test_a_compiler_child_burning_cpu_is_named_and_measured(tree: object, tmp_path: Path) -> None:
    compiler = tmp_path / "cc1plus"
    compiler.symlink_to(os.path.realpath(sys.executable))  # comm is the program's name
    root, (child,) = tree(BUSY, executable=str(compiler))  # type: ignore[operator]
    sampler = EvidenceSampler(root)
    evidence = sample_until(
        sampler, lambda e: any((p.cpu_per_s or 0) > 0 for p in e.compilers), "a busy cc1plus"
    )  # (> 0, not a share of a core: on a loaded machine a busy loop gets what is left)
    (busy,) = evidence.compilers
    assert (busy.pid, busy.label, busy.role.kind) == (child, "cc1plus", Kind.COMPILER)
    assert evidence.by_pid(root).role.kind is Kind.LAUNCHER  # type: ignore[union-attr]
    assert busy.cpu_s > 0 and busy.state in (State.RUNNING, State.SLEEPING)


def test_gpu_memory_per_process_comes_from_nvml_when_present(tree: object) -> None:
    root, (child,) = tree(SLEEPER)  # type: ignore[operator]
    report = GpuReport(True, devices=(
        GpuDevice(0, "H100", 70 << 30, 80 << 30, (GpuProcess(child, 60 << 30),)),
        GpuDevice(1, "H100", 10 << 30, 80 << 30, (GpuProcess(child, 5 << 30),)),
    ))  # fmt: skip
    evidence = EvidenceSampler(root, gpu=lambda: report).sample(time.monotonic())
    assert evidence.gpu_available
    assert evidence.by_pid(child).gpu_bytes == 65 << 30  # type: ignore[union-attr]
    assert evidence.by_pid(root).gpu_bytes is None  # type: ignore[union-attr]
    assert 0 < evidence.by_pid(child).age_s < 600  # type: ignore[union-attr]
    absent = GpuReport(False, reason="no GPU information: no NVIDIA driver")
    quiet = EvidenceSampler(root, gpu=lambda: absent).sample(time.monotonic())
    assert "GPU: no GPU information: no NVIDIA driver" in quiet.describe()


STORE = r"""
import socket, sys, time
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", 0)); server.listen(8)
port = server.getsockname()[1]
own = socket.create_connection(("127.0.0.1", port))   # rank 0's own client, as TCPStore does
accepted = [server.accept()[0]]
print(port, flush=True)
server.settimeout(0.1)
while True:
    try:
        accepted.append(server.accept()[0])
    except OSError:
        pass
"""


def test_the_store_counts_one_rank_of_two_until_the_other_node_connects() -> None:
    store = subprocess.Popen([sys.executable, "-c", STORE], stdout=subprocess.PIPE, text=True)
    try:
        assert store.stdout is not None
        port = int(store.stdout.readline())
        dist = DistInit("127.0.0.1", port, nnodes=2, node_rank=0, world_size=2)
        sampler = EvidenceSampler(store.pid, dist=dist)
        alone = sampler.sample(time.monotonic()).peers
        assert alone is not None and alone.hosts_store
        assert (alone.joined, alone.missing, alone.missing_nodes()) == (1, 1, (1,))
        assert alone.describe().endswith("1 of 2 ranks connected; missing node 1 (rank 1)")
        with socket.create_connection(("127.0.0.1", port)) as peer:
            local = f"127.0.0.1:{peer.getsockname()[1]}"
            joined = sample_until(
                sampler, lambda e: e.peers is not None and e.peers.joined == 2, "node 1 joined"
            ).peers
            assert joined is not None and joined.remote == (local,) and joined.missing == 0
    finally:
        kill_tree([store.pid])
        store.wait(timeout=10)
        if store.stdout is not None:
            store.stdout.close()


def test_a_tree_whose_root_is_gone_is_not_alive() -> None:
    popen = subprocess.Popen([sys.executable, "-c", "pass"])
    sampler = EvidenceSampler(popen.pid)
    popen.wait()
    evidence = sampler.sample(time.monotonic())
    assert not evidence.alive and evidence.processes == ()
    assert evidence.describe() == [f"PID {popen.pid}: not running"]


# SGLang 0.5.23's loader opens shards in a thread pool while the main thread waits for it
# (tests/fixtures/pyspy/fifo): the wait worth naming is the worker's.
POOL_OPENER = """
import threading
worker = threading.Thread(target=lambda: open({path!r}, "rb"), name="loader")
worker.start()
worker.join()
"""


def test_a_worker_thread_blocked_on_a_file_is_the_wait_named(tree: object, tmp_path: Path) -> None:
    fifo = tmp_path / "model.safetensors"
    os.mkfifo(fifo)
    root, (rank,) = tree(POOL_OPENER.format(path=str(fifo)))  # type: ignore[operator]
    sampler = EvidenceSampler(root)

    def the_worker_named(e: TreeEvidence) -> bool:
        p = e.by_pid(rank)
        return p is not None and p.blocked is not None and p.blocked.path == str(fifo)

    evidence = sample_until(sampler, the_worker_named, "the loader thread's wait")
    call = evidence.by_pid(rank).blocked  # type: ignore[union-attr]
    assert call is not None and call.tid not in (None, rank) and call.syscall == "openat"
    assert call.describe().startswith(
        f"thread {call.tid} (python) blocked in openat({fifo}): opening a FIFO"
    )

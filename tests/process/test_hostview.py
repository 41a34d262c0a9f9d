"""The host scans every watcher shares (``core.proc.hostview``): shared, never older than a
watcher's previous look, and right about real processes and ports."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from support.waiting import wait_until

from eagle_tui.core.proc.hostview import (
    HostLook,
    SharedScan,
    read_children,
    read_listening,
)
from eagle_tui.core.proc.ports import port_status


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def counting_scan(clock: Clock) -> tuple[SharedScan[int], list[int]]:
    reads: list[int] = []

    def read() -> int:
        reads.append(len(reads))
        return len(reads)

    return SharedScan(read, fresh_s=0.25, clock=clock), reads


def test_a_scan_is_shared_with_a_caller_that_looked_before_it_was_taken() -> None:
    clock = Clock()
    scan, reads = counting_scan(clock)
    first, at = scan.get(after=99.0)
    clock.now += 0.1
    assert scan.get(after=99.5) == (first, at)  # another watcher, last looked before it
    assert len(reads) == 1


def test_a_caller_never_gets_the_scan_it_already_saw_or_an_old_one() -> None:
    clock = Clock()
    scan, reads = counting_scan(clock)
    _, at = scan.get(after=99.0)
    clock.now += 0.1
    again, _ = scan.get(after=at)  # the same watcher's next look: read again
    assert again == 2
    clock.now += 0.3
    assert scan.get(after=0.0)[0] == 3  # older than fresh_s: read again for anyone
    assert len(reads) == 3


def test_a_scan_that_fails_is_not_kept() -> None:
    clock = Clock()
    calls: list[str] = []

    def read() -> int:
        calls.append("read")
        if len(calls) == 1:
            raise OSError("proc not mounted")
        return 7

    scan = SharedScan(read, clock=clock)
    with pytest.raises(OSError):
        scan.get(after=0.0)
    assert scan.get(after=0.0)[0] == 7


@pytest.fixture()
def tree() -> Iterator[tuple[subprocess.Popen[bytes], socket.socket]]:
    """A real parent with a child and a grandchild, and a listening socket of ours."""
    code = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
            "'import time; time.sleep(60)']); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c",
                               f"import subprocess, sys; subprocess.Popen([sys.executable, "
                               f"'-c', {code!r}]).wait()"])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        yield parent, listener
    finally:
        listener.close()
        for pid in _below(parent.pid):
            os.kill(pid, 9)
        parent.kill()
        parent.wait()


def _below(pid: int) -> list[int]:
    table = read_children()
    found, pending = [], list(table.get(pid, ()))
    while pending:
        child = pending.pop()
        found.append(child)
        pending.extend(table.get(child, ()))
    return found


def test_many_watchers_share_one_scan_and_each_sees_the_truth(
        tree: tuple[subprocess.Popen[bytes], socket.socket]) -> None:
    parent, listener = tree
    port = listener.getsockname()[1]
    wait_until(lambda: len(_below(parent.pid)) == 2, timeout=30, what="the grandchild")
    reads: list[str] = []

    def counted_listening() -> object:
        reads.append("listening")
        return read_listening()

    def counted_children() -> object:
        reads.append("children")
        return read_children()

    listening = SharedScan(counted_listening, fresh_s=60)  # type: ignore[arg-type]
    children = SharedScan(counted_children, fresh_s=60)  # type: ignore[arg-type]
    looks = [HostLook(listening, children) for _ in range(64)]
    for look in looks:
        assert look.descendants(parent.pid) == _below(parent.pid)
        status = port_status(port, frozenset({os.getpid()}), look.listening_inodes)
        assert status.bound and status.holder_pid == os.getpid()
    assert reads == ["children", "listening"]  # 64 watchers, one scan of each
    listener.close()
    assert not port_status(port, None, looks[0].listening_inodes).bound  # its next look

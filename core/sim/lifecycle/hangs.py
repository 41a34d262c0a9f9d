"""Start-up failures the processes show, not the log: real child processes that hang.

Each is a scheduler rank started as its own process, titled as SGLang titles its ranks
(``sglang::scheduler_TP0``, the first word of its command line, where ``core.proc.titles``
reads it), so the watcher's process evidence sees what it would see on a real server:

- ``--rank-hang fifo``: after ``Load weight begin`` the rank opens ``model.safetensors``, a
  named pipe nobody writes (blocked in ``openat``, ``wait_for_partner``). The pipe's
  temporary directory is removed by a small cleaner that outlives the rank, however the sim
  ends (it may be killed, its rank with it); the name must stay while the rank waits, since
  a stack sampler (py-spy) attaching to it restarts the ``openat``, which looks it up again;
- ``--rank-hang stop``: after ``Load weight begin`` the rank stops itself (SIGSTOP);
- ``--rank-hang peers``: during distributed init, node 0's rank hosts the rendezvous store on
  ``--dist-init-addr`` and waits for the other nodes' ranks, which never connect;
- ``--jit-compile S``: at the start of graph capture the rank runs a compiler child
  (``cc1plus``) that burns a core for S seconds and prints nothing; the start-up goes on after;
- ``--leave-orphan S``: a child that outlives the sim (its own session), then holds the sim's
  port for S seconds, as a leftover scheduler of an earlier run does.

Children are stdlib-only ``python -c`` programs (their first argument is the title, so the
interpreter cannot find the project; they need nothing of it). Every child but the orphan
and the FIFO cleaner dies with the sim (``PR_SET_PDEATHSIG``, as SGLang's ranks do).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final

RANK_TITLE: Final = "sglang::scheduler_TP0"
ORPHAN_TITLE: Final = "sglang::scheduler_TP1"
CLEANER_TITLE: Final = "eagle-sim-fifo-cleaner"
COMPILER: Final = "cc1plus"

_DIE_WITH_PARENT = """
import ctypes, os, signal, socket, subprocess, sys, time
try:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass
if os.getppid() == 1:
    sys.exit(0)
"""
_FIFO = _DIE_WITH_PARENT + """
path = sys.argv[1]
if not os.path.exists(path):
    os.mkfifo(path)
with open(path, "rb") as shard:  # blocks here: no process opens the pipe for writing
    shard.read()
"""
_STOP = _DIE_WITH_PARENT + """
os.kill(os.getpid(), signal.SIGSTOP)
time.sleep(3600)
"""
_PEERS = _DIE_WITH_PARENT + """
host, port, world = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
store = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
store.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
store.bind((host, port))
store.listen(64)
me = socket.create_connection((host, port))  # rank 0 is a client of its own store too
joined = [store.accept()[0]]
while len(joined) < world:  # the other nodes' ranks never come
    joined.append(store.accept()[0])
"""
_BURN = _DIE_WITH_PARENT + """
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    pass
"""
_COMPILE = _DIE_WITH_PARENT + """
python, compiler, seconds, code = sys.argv[1:5]
subprocess.run([compiler, "-c", code, seconds], executable=python)
print("compiled", flush=True)
while True:  # the rank lives on (and dies with the sim)
    time.sleep(3600)
"""
_CLEANER = """
import os, shutil, signal, sys, time
rank, folder = sys.argv[1], sys.argv[2]

def alive_since(pid):  # field 22 of /proc/PID/stat tells a reused PID from the rank
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return None
    return None if len(fields) < 20 or fields[0] in "ZX" else fields[19]

def clean(*_):
    shutil.rmtree(folder, ignore_errors=True)
    os._exit(0)

signal.signal(signal.SIGTERM, clean)  # stopped with the sim's other processes: clean first
signal.signal(signal.SIGINT, clean)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
first = alive_since(rank)
while first is not None and alive_since(rank) == first:
    time.sleep(0.2)
clean()
"""
_ORPHAN = """
import os, socket, sys, time
parent, port, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
while os.getppid() == parent:
    time.sleep(0.1)
held = socket.socket()
held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    held.bind(("127.0.0.1", port))
    held.listen(1)
except OSError:
    pass
time.sleep(seconds)
"""


def _child(title: str, code: str, *args: str, new_session: bool = False,
           stdout: int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [title, "-c", code, *args],
        executable=sys.executable,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.DEVNULL,
        start_new_session=new_session,
    )


async def _forever(child: subprocess.Popen[bytes]) -> None:
    """The sim waits on its rank as SGLang's launcher does: for ever, printing nothing."""
    while True:
        await asyncio.sleep(1.0)
        if child.poll() is not None:
            await asyncio.Event().wait()  # the rank died: still no output, no progress


async def fifo_rank() -> None:
    """A rank blocked opening a named pipe as its weight shard; never returns. Its cleaner
    removes the pipe's directory once the rank has gone (see the module docstring)."""
    folder = Path(tempfile.mkdtemp(prefix="eagle-sim-model-fifo-"))
    try:
        rank = _child(RANK_TITLE, _FIFO, str(folder / "model.safetensors"))
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    _child(CLEANER_TITLE, _CLEANER, str(rank.pid), str(folder), new_session=True)
    await _forever(rank)


async def stopped_rank() -> None:
    """A rank that stops itself with SIGSTOP; never returns."""
    await _forever(_child(RANK_TITLE, _STOP))


async def store_rank(address: str, world_size: int) -> None:
    """Node 0's rank hosting the rendezvous store at ``address`` (HOST:PORT), waiting for
    ``world_size`` ranks of which only itself comes; never returns."""
    host, _, port = address.rpartition(":")
    await _forever(_child(RANK_TITLE, _PEERS, host.strip("[]"), port, str(world_size)))


_RANKS: list[subprocess.Popen[bytes]] = []  # alive until the sim ends


async def compile_rank(seconds: float) -> None:
    """A rank whose compiler child burns a core for ``seconds``; returns when the compile is
    done (the rank lives on, idle, as a real rank would)."""
    child = _child(RANK_TITLE, _COMPILE, sys.executable, COMPILER, str(seconds), _BURN,
                   stdout=subprocess.PIPE)
    _RANKS.append(child)
    assert child.stdout is not None
    await asyncio.to_thread(child.stdout.readline)


def leave_orphan(port: int, seconds: float) -> int:
    """Start the leftover child; its PID (it outlives the sim, then holds ``port``)."""
    child = _child(ORPHAN_TITLE, _ORPHAN, str(os.getpid()), str(port), str(seconds),
                   new_session=True)
    return child.pid

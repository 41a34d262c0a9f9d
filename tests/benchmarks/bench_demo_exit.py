"""``eagle-tui demo``: time to first paint, and how long each way out takes.

Runs the demo on a 120×40 pseudo-terminal in a private state directory, times its first
paint (the view bar on the terminal), lets it capture for a while, then ends it one way
(``q``, ctrl+c, SIGHUP as when an SSH connection drops, SIGTERM) and times how long until
the demo process has exited and until nothing it started is left (processes carrying its
state directory, registry records, run directories). Targets: first paint <= 1.5 s, back
to the prompt <= 2 s.

    .venv/bin/python tests/benchmarks/bench_demo_exit.py [--runs 2] [--after 8] [--way q ...]
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

import psutil

from eagle_tui.core.argtypes import OneLineParser, Whole, seconds

MARKER = b"Inspect"
WAYS = {"q": b"q", "ctrl+c": b"\x03", "SIGHUP": signal.SIGHUP, "SIGTERM": signal.SIGTERM}
PAINT_LIMIT_S = 60.0
EXIT_LIMIT_S = 30.0


def leftovers(state: Path) -> list[str]:
    """What a demo under ``state`` left: processes, records, run directories."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("EAGLE_TUI_STATE_DIR") == str(state):
                found.append(f"process {process.pid}")
        except (psutil.Error, OSError):
            continue
    found += [f"record {p.name}" for p in (state / "batches").glob("*.json")]
    found += [f"run {p.name}" for p in (state / "demo").glob("run-*")]
    return found


def start_demo(state: Path) -> tuple[subprocess.Popen[bytes], int]:
    """The demo on a 120×40 pseudo-terminal; (its process, the terminal's primary side)."""
    env = {**os.environ, "EAGLE_TUI_STATE_DIR": str(state), "EAGLE_TUI_CONFIG_DIR": str(state),
           "TERM": "xterm-256color"}
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "eagle_tui.tui.cli", "demo", "--time-scale", "0.2"],
        stdin=secondary, stdout=secondary, stderr=secondary, env=env, start_new_session=True,
    )
    os.close(secondary)
    return process, primary


def read_until(primary: int, deadline: float, marker: bytes | None = None) -> bool:
    """Drain the terminal until ``deadline`` (or until ``marker`` is seen: True)."""
    seen = b""
    while time.perf_counter() < deadline:
        ready, _, _ = select.select([primary], [], [], 0.02)
        if ready:
            seen = seen[-len(MARKER):] + os.read(primary, 65536)
            if marker is not None and marker in seen:
                return True
    return False


def end(process: subprocess.Popen[bytes], primary: int, way: str) -> float:
    """End the demo one way; seconds until it exited (it is killed after EXIT_LIMIT_S:
    then the figure is inf)."""
    ended = time.perf_counter()
    action = WAYS[way]
    if isinstance(action, bytes):
        os.write(primary, action)
    else:
        process.send_signal(action)
    deadline = ended + EXIT_LIMIT_S
    while process.poll() is None and time.perf_counter() < deadline:
        try:
            read_until(primary, min(deadline, time.perf_counter() + 0.05))
        except OSError:  # the terminal's other side closed: only waiting is left
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(0.0, deadline - time.perf_counter()))
    if process.poll() is None:
        process.kill()
        process.wait()
        return float("inf")
    return time.perf_counter() - ended


def one_run(way: str, after_s: float) -> tuple[float, float, float, list[str]]:
    """(first paint, exit, all clean) seconds, and what was left after 10 s. The way out is
    sent ``after_s`` after the first paint (a key sent before the app reads its terminal
    would be lost)."""
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        started = time.perf_counter()
        process, primary = start_demo(state)
        try:
            shown = read_until(primary, started + PAINT_LIMIT_S, MARKER)
            painted = time.perf_counter() - started if shown else float("nan")
            read_until(primary, time.perf_counter() + after_s)
            ended = time.perf_counter()
            exited = end(process, primary, way)
        finally:
            if process.poll() is None:
                process.kill()
            os.close(primary)
        while leftovers(state) and time.perf_counter() - ended < 10:
            time.sleep(0.05)
        return painted, exited, time.perf_counter() - ended, leftovers(state)


def main() -> None:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Whole(1, 1000), default=2, help="per way out")
    parser.add_argument("--after", type=seconds(zero=True, high=3600), default=8.0,
                        help="seconds from the first paint to ending it")
    parser.add_argument("--way", action="append", choices=WAYS, default=None,
                        help="one way out (repeatable; default: every way)")
    args = parser.parse_args()
    paints: list[float] = []
    for way in args.way or WAYS:
        results = [one_run(way, args.after) for _ in range(args.runs)]
        paints += [r[0] for r in results]
        exits = ", ".join(f"{r[1]:.2f}" for r in results)
        cleans = ", ".join(f"{r[2]:.2f}" for r in results)
        left = sorted({item for r in results for item in r[3]}) or ["nothing"]
        print(f"{way:<8} exit after {exits} s; everything gone after {cleans} s; "
              f"left: {', '.join(left)}", flush=True)
    print(f"first paint: median {statistics.median(paints):.2f} s, worst {max(paints):.2f} s "
          f"over {len(paints)} runs (targets: paint <= 1.5 s, exit <= 2 s)")


if __name__ == "__main__":
    main()

"""``eagle-tui demo``: time to first paint, and how long each way out takes.

Runs the demo on a 120×40 pseudo-terminal in a private state directory, times its first
paint (the view bar on the terminal), lets it capture for a while, then ends it one way
(``q``, ctrl+c, SIGHUP as when an SSH connection drops, SIGTERM) and times how long until
the demo process has exited and until nothing it started is left (processes carrying its
state directory, registry records, run directories). Targets: first paint <= 1.5 s, back
to the prompt <= 2 s.

    .venv/bin/python tests/benchmarks/bench_demo_exit.py [--runs 2] [--after 8]
"""

from __future__ import annotations

import argparse
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

MARKER = b"Inspect"
WAYS = {"q": b"q", "ctrl+c": b"\x03", "SIGHUP": signal.SIGHUP, "SIGTERM": signal.SIGTERM}


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


def one_run(way: str, after_s: float) -> tuple[float, float, float, list[str]]:
    """(first paint, exit, all clean) seconds, and what was left after 10 s."""
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        env = {**os.environ, "EAGLE_TUI_STATE_DIR": str(state), "EAGLE_TUI_CONFIG_DIR": tmp,
               "TERM": "xterm-256color"}
        primary, secondary = pty.openpty()
        fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "eagle_tui.tui.cli", "demo", "--time-scale", "0.2"],
            stdin=secondary, stdout=secondary, stderr=secondary, env=env,
            start_new_session=True,
        )
        os.close(secondary)
        seen, painted = b"", None
        deadline = started + after_s
        while time.perf_counter() < deadline:
            ready, _, _ = select.select([primary], [], [], 0.02)
            if ready:
                seen += os.read(primary, 65536)
                if painted is None and MARKER in seen:
                    painted = time.perf_counter() - started
        ended = time.perf_counter()
        action = WAYS[way]
        if isinstance(action, bytes):
            os.write(primary, action)
        else:
            process.send_signal(action)
        while process.poll() is None:
            ready, _, _ = select.select([primary], [], [], 0.02)
            if ready:
                try:
                    os.read(primary, 65536)
                except OSError:
                    break
        exited = time.perf_counter() - ended
        process.wait()
        os.close(primary)
        while leftovers(state) and time.perf_counter() - ended < 10:
            time.sleep(0.05)
        return painted or float("nan"), exited, time.perf_counter() - ended, leftovers(state)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="per way out")
    parser.add_argument("--after", type=float, default=8.0, help="seconds before ending it")
    args = parser.parse_args()
    paints: list[float] = []
    for way in WAYS:
        results = [one_run(way, args.after) for _ in range(args.runs)]
        paints += [r[0] for r in results]
        exits = ", ".join(f"{r[1]:.2f}" for r in results)
        cleans = ", ".join(f"{r[2]:.2f}" for r in results)
        left = sorted({item for r in results for item in r[3]}) or ["nothing"]
        print(f"{way:<8} exit after {exits} s; everything gone after {cleans} s; "
              f"left: {', '.join(left)}")
    print(f"first paint: median {statistics.median(paints):.2f} s, worst {max(paints):.2f} s "
          f"over {len(paints)} runs (targets: paint <= 1.5 s, exit <= 2 s)")


if __name__ == "__main__":
    main()

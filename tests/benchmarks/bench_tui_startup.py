"""Time to first paint of the dashboard (target: <= 1.5 s on the project machine).

Starts ``python -m eagle_tui.tui.dashboard`` on a pseudo-terminal (as a user's shell would), reads
its output until the view bar has been drawn, then sends ``q``. Repeats and prints the
median and worst. Transformers must not be imported before the first paint.

    .venv/bin/python tests/benchmarks/bench_tui_startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = b"Inspect"  # the last tab of the view bar: drawn in the first frame
TIMEOUT_S = 30.0


def first_paint(env: dict[str, str]) -> float:
    """Seconds from spawning the dashboard to the view bar appearing on its terminal."""
    primary, secondary = pty.openpty()
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "eagle_tui.tui.dashboard"],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        cwd=ROOT,
        env=env,
        close_fds=True,
    )
    os.close(secondary)
    seen = b""
    try:
        while MARKER not in seen:
            if time.perf_counter() - started > TIMEOUT_S:
                raise TimeoutError(f"no first paint within {TIMEOUT_S} s")
            ready, _, _ = select.select([primary], [], [], 0.05)
            if ready:
                seen += os.read(primary, 65536)
        painted = time.perf_counter() - started
        os.write(primary, b"q")
        _drain_until_exit(primary, process)
        return painted
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(primary)


def _drain_until_exit(primary: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.perf_counter() + 10.0
    while process.poll() is None and time.perf_counter() < deadline:
        ready, _, _ = select.select([primary], [], [], 0.05)
        if ready:
            try:
                os.read(primary, 65536)
            except OSError:
                break


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state:
        env = {
            **os.environ,
            "EAGLE_TUI_STATE_DIR": state,
            "EAGLE_TUI_CONFIG_DIR": state,
            "TERM": "xterm-256color",
            "COLUMNS": "120",
            "LINES": "40",
        }
        first_paint(env)  # warm the OS file cache once; not counted
        times = [first_paint(env) for _ in range(args.runs)]
    print(
        f"time to first paint over {args.runs} runs: median {statistics.median(times):.3f} s, "
        f"worst {max(times):.3f} s, best {min(times):.3f} s (target <= 1.5 s)"
    )


if __name__ == "__main__":
    main()

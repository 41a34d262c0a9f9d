"""Run a command and write its peak RSS (KiB, from ``wait4``) to a file: a small launcher.

A process forked straight from a pytest worker starts with the worker's high-water mark (the
kernel keeps the forked copy's peak across ``exec``), so a worker that has grown to 500 MiB
measures every child at 500 MiB or more. Forked from this small process instead, the command's
peak is its own. Needs no GNU ``time``.

    python tests/support/peak_rss.py RSS_FILE TIMEOUT_S -- COMMAND ARG...

The command is killed (SIGKILL) after TIMEOUT_S seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading


def main(argv: list[str]) -> int:
    rss_file, timeout_s, separator, *command = argv
    assert separator == "--", "usage: peak_rss.py RSS_FILE TIMEOUT_S -- COMMAND ARG..."
    child = subprocess.Popen(command)
    timer = threading.Timer(float(timeout_s), lambda: os.kill(child.pid, signal.SIGKILL))
    timer.start()
    try:
        _, status, usage = os.wait4(child.pid, 0)
    finally:
        timer.cancel()
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    with open(rss_file, "w", encoding="ascii") as out:
        out.write(f"{usage.ru_maxrss}\n")
    return child.returncode if child.returncode >= 0 else 128 - child.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Test helper run as a script: a process that binds a TCP port, like a server would.

Prints ``READY <port> <child pids…>`` once listening. Options: ``--bind PORT`` (0, the
default, = any free port), ``--children N`` (sleeping child processes, a stand-in for TP ranks),
``--ignore-term`` (survive SIGTERM, so a stop must escalate). On SIGTERM it normally
terminates its children and exits 0. Extra arguments (markers such as ``sglang``) are
ignored (``--port N`` too) so tests can shape the command line.
"""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
from types import FrameType


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--bind", type=int, default=0)
    parser.add_argument("--children", type=int, default=0)
    parser.add_argument("--ignore-term", action="store_true")
    args, _ = parser.parse_known_args()
    kids = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        for _ in range(args.children)
    ]

    def on_term(signum: int, frame: FrameType | None) -> None:
        for kid in kids:
            kid.terminate()
            kid.wait()
        sys.exit(0)

    signal.signal(signal.SIGTERM, signal.SIG_IGN if args.ignore_term else on_term)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.bind))
    sock.listen()
    pids = " ".join(str(k.pid) for k in kids)
    print(f"READY {sock.getsockname()[1]} {pids}".rstrip(), flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    main()

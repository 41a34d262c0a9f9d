#!/usr/bin/env python3
"""Record what eagle-tui's process evidence and py-spy see on a real SGLang made to hang.

    .venv/bin/python scripts/realsglang/record_evidence.py CASE [CASE...] \\
        --venv $REALSGLANG_HOME/venv --model $REALSGLANG_HOME/script-model \\
        --out tests/fixtures/pyspy [--workdir /tmp/hangs] [--seconds 20]

For each CASE (peers, fifo, stop, plain; see hang.py) it starts the hang with hang.py,
samples the server's tree once a second for ``--seconds`` with ``EvidenceSampler``, dumps
every process's Python stack with ``py-spy dump --json --locals`` (raw output, as py-spy
printed it), and writes OUT/CASE/: ``pyspy-<label>.json`` per process, ``evidence.json``
(the last sample and the description lines), ``server.log``; for ``plain`` also
``server_info.json`` (``/server_info``, with ``startup_time``). Then it stops the server.
Run from the repository root with eagle-tui's own venv (it imports eagle_tui).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eagle_tui.core.proc import blocked
from eagle_tui.core.proc.pyspy import find_pyspy
from eagle_tui.core.proc.sampler import EvidenceSampler

HERE = Path(__file__).resolve().parent


def record(case: str, args: argparse.Namespace) -> None:
    workdir = Path(args.workdir) / case
    out = Path(args.out) / case
    out.mkdir(parents=True, exist_ok=True)
    hang = [sys.executable, str(HERE / "hang.py")]
    started = subprocess.run(
        [*hang, "start", case, "--venv", args.venv, "--model", args.model,
         "--workdir", str(workdir), "--timeout", str(args.timeout)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    info = json.loads(started.stdout.splitlines()[-1])
    try:
        sampler = EvidenceSampler(int(info["pid"]))
        evidence = sampler.sample(time.monotonic())
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            time.sleep(1.0)
            evidence = sampler.sample(time.monotonic())
        dumps = {}
        for proc in evidence.processes:
            label = proc.label.replace(" ", "_").replace("/", "_")
            nonblocking = proc.state.value in ("stopped", "tracing stop", "disk wait")
            raw = pyspy_raw(proc.pid, nonblocking)
            (out / f"pyspy-{label}.json").write_text(raw)
            wait = blocked.look(proc.pid)
            dumps[label] = {"pid": proc.pid, "state": proc.state.value,
                            "nonblocking": nonblocking,
                            "wait_syscall": wait.syscall if wait else None}  # fmt: skip
        summary = {
            "case": case,
            "recorded": datetime.now(UTC).isoformat(timespec="seconds"),
            "sglang": "0.5.23 (CPU, scripts/realsglang)",
            "command": info["command"],
            "hang": {k: v for k, v in info.items() if k != "command"},
            "describe": evidence.describe(),
            "dumps": dumps,
            "evidence": dataclasses.asdict(evidence),
        }
        (out / "evidence.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
        if case == "plain":
            url = f"http://127.0.0.1:{info['port']}/server_info"
            with urllib.request.urlopen(url, timeout=30) as reply:
                server_info: Any = json.loads(reply.read())
            (out / "server_info.json").write_text(json.dumps(server_info, indent=1) + "\n")
        (out / "server.log").write_text(Path(info["log"]).read_text(errors="replace"))
    finally:
        subprocess.run([*hang, "stop", "--workdir", str(workdir)], check=False)


def pyspy_raw(pid: int, nonblocking: bool) -> str:
    binary = find_pyspy()
    if binary is None:
        raise SystemExit("py-spy not found")
    command = [binary, "dump", "--pid", str(pid), "--json", "--locals"]
    command += ["--nonblocking"] if nonblocking else []
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        return json.dumps({"error": done.stderr.strip().splitlines()[:3]})
    return json.dumps(json.loads(done.stdout), indent=1) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="+", choices=("peers", "fifo", "stop", "plain"))
    parser.add_argument("--venv", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", default="tests/fixtures/pyspy")
    parser.add_argument("--workdir", default="/tmp/eagle-tui-hangs")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--timeout", type=float, default=1800.0, help="per start (s)")
    args = parser.parse_args()
    for case in args.cases:
        record(case, args)
        print(f"recorded {case} in {Path(args.out) / case}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

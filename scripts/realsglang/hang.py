#!/usr/bin/env python3
"""Start a real SGLang 0.5.23 (CPU, scripts/realsglang) made to hang for real, and stop it.

    hang.py start CASE --venv VENV --model DIR --workdir DIR [--port N] [--dist-port N]
    hang.py stop --workdir DIR

CASE is one of:
  peers  ``--nnodes 2 --node-rank 0 --tp-size 2 --dist-init-addr 127.0.0.1:DIST`` and no
         node 1: node 0's rank waits in torch.distributed's rendezvous for a peer that
         never comes. Returns once the log says ``Init parallel begin``.
  fifo   the model directory copied to WORKDIR/model-fifo with ``model.safetensors``
         replaced by a named pipe nobody writes: the rank blocks opening the shard.
         Returns once the log says ``Load weight begin``.
  stop   a plain start whose scheduler is sent SIGSTOP as soon as the log says
         ``Load weight begin``. Returns once the rank is stopped.
  plain  a plain start. Returns once the log says the server is ready and /health is 200.

``start`` prints one JSON line: ``{"case", "pid" (the launcher, also the process group),
"port", "log", "dist_addr", "fifo", "stopped_pid", "command"}`` and leaves the server
running; ``stop`` ends the process group (SIGCONT first, so a stopped rank can die too;
SIGKILL: a hung server does not drain). Standard library only: it runs with any Python 3.

The next engineer reproduces each case with it; tests/process/test_evidence_real_sglang.py
and scripts/realsglang/record_evidence.py drive it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

CASES = ("peers", "fifo", "stop", "plain")
FLAGS = [
    "--device", "cpu", "--attention-backend", "torch_native", "--sampling-backend", "pytorch",
    "--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled",
    "--disable-overlap-schedule", "--sleep-on-idle", "--dtype", "float32",
    "--mem-fraction-static", "0.05", "--max-total-tokens", "8192",
]  # fmt: skip
READY = "The server is fired up and ready to roll"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fifo_model(model: Path, workdir: Path) -> tuple[Path, Path]:
    """A copy of ``model`` whose safetensors shard is a named pipe nobody writes."""
    copy = workdir / "model-fifo"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(model, copy)
    shards = sorted(copy.glob("*.safetensors"))
    if not shards:
        raise SystemExit(f"hang.py: no *.safetensors in {model}")
    shard = shards[0]
    shard.unlink()
    os.mkfifo(shard)
    return copy, shard


def log_has(log: Path, text: str) -> bool:
    try:
        return text in log.read_text(errors="replace")
    except OSError:
        return False


def health(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


def scheduler_pids(pid: int) -> list[int]:
    """Children of ``pid`` titled ``sglang::scheduler…`` (from /proc, no psutil needed)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid and argv.startswith("sglang::scheduler"):
            found.append(int(name))
    return sorted(found)


def wait(condition: Callable[[], bool], pid: int, log: Path, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0:
            tail = log.read_text(errors="replace").splitlines()[-20:]
            raise SystemExit(f"hang.py: the server exited before {what}:\n" + "\n".join(tail))
        if time.monotonic() > deadline:
            raise SystemExit(f"hang.py: no {what} after {timeout:g} s (log {log})")
        time.sleep(0.05)


def start(args: argparse.Namespace) -> dict[str, object]:
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "server.log"
    port = args.port or free_port()
    model, fifo = Path(args.model).resolve(), None
    extra: list[str] = []
    dist_addr = None
    if args.case == "peers":
        dist_addr = f"127.0.0.1:{args.dist_port or free_port()}"
        extra = ["--nnodes", "2", "--node-rank", "0", "--tp-size", "2"]
        extra += ["--dist-init-addr", dist_addr]
    if args.case == "fifo":
        model, fifo = fifo_model(model, workdir)
    command = [
        f"{args.venv}/bin/python", "-m", "sglang.launch_server", "--model-path", str(model),
        "--host", "127.0.0.1", "--port", str(port), *FLAGS, *extra,
    ]  # fmt: skip
    env = {**os.environ, "SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1"}
    env["TRANSFORMERS_OFFLINE"] = "1"
    if args.case == "peers":
        # SGLang's CPU path binds each rank to a NUMA node and refuses more ranks than nodes;
        # one CPU per rank of the 2-rank world lets node 0's rank start on any machine.
        env.setdefault("SGLANG_CPU_OMP_THREADS_BIND", "0|1" if os.cpu_count() != 1 else "0|0")
    with open(log, "wb") as out:
        popen = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True,
        )  # fmt: skip
    (workdir / "server.pid").write_text(str(popen.pid))
    stopped = None
    timeout = args.timeout
    if args.case == "peers":
        wait(lambda: log_has(log, "Init parallel begin"), popen.pid, log, timeout,
             "'Init parallel begin'")  # fmt: skip
    elif args.case == "fifo":
        wait(lambda: log_has(log, "Load weight begin"), popen.pid, log, timeout,
             "'Load weight begin'")  # fmt: skip
    elif args.case == "stop":
        wait(lambda: log_has(log, "Load weight begin"), popen.pid, log, timeout,
             "'Load weight begin'")  # fmt: skip
        ranks = scheduler_pids(popen.pid)
        if not ranks:
            raise SystemExit("hang.py: no sglang::scheduler process to stop")
        stopped = ranks[0]
        os.kill(stopped, signal.SIGSTOP)
    else:
        wait(lambda: log_has(log, READY) and health(port) == 200, popen.pid, log, timeout,
             "readiness")  # fmt: skip
    return {
        "case": args.case, "pid": popen.pid, "port": port, "log": str(log),
        "dist_addr": dist_addr, "fifo": str(fifo) if fifo else None, "stopped_pid": stopped,
        "command": command,
    }  # fmt: skip


def stop(args: argparse.Namespace) -> None:
    pidfile = Path(args.workdir) / "server.pid"
    if not pidfile.exists():
        return
    group = int(pidfile.read_text())
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.killpg(group, sig)
        except ProcessLookupError:
            break
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        alive = subprocess.run(["pgrep", "-g", str(group)], capture_output=True).stdout.strip()
        if not alive:
            break
        time.sleep(0.1)
    pidfile.unlink(missing_ok=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    begin = verbs.add_parser("start")
    begin.add_argument("case", choices=CASES)
    begin.add_argument("--venv", required=True, help="the SGLang venv (realsglang.sh install)")
    begin.add_argument("--model", required=True, help="a model it serves on the CPU")
    begin.add_argument("--workdir", required=True, help="server.log and server.pid go here")
    begin.add_argument("--port", type=int, default=0, help="HTTP port (default: a free one)")
    begin.add_argument("--dist-port", type=int, default=0, help="peers: rendezvous port")
    begin.add_argument("--timeout", type=float, default=600.0, help="seconds to wait (600)")
    end = verbs.add_parser("stop")
    end.add_argument("--workdir", required=True)
    args = parser.parse_args()
    if args.verb == "start":
        if not Path(args.venv, "bin", "python").is_file():
            parser.error(f"--venv {args.venv}: no bin/python there (realsglang.sh install)")
        if not Path(args.model, "config.json").is_file():
            parser.error(f"--model {args.model}: no config.json there (realsglang.sh model)")
    if args.verb == "stop":
        stop(args)
        return 0
    try:
        print(json.dumps(start(args)), flush=True)
    except BaseException:
        stop(args)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())

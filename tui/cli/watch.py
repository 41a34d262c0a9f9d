"""``eagle-tui watch``: watch a server start up; exit 0 when ready, non-zero with a diagnosis.

    eagle-tui watch --url URL [--log FILE] [--pid PID | --launch -- CMD ...]
                    [--timeout S] [--json] [--keep-watching] ...
    eagle-tui watch --all [--json] [--timeout S]

Prints one line per phase change, flag raised or cleared (with its next step), progress
step and problem (or one JSON object per line with ``--json``), then a final verdict line.
Replaces a shell loop around ``curl /health``: it tells loading from crashed from hung
from "the old server still holds the port", within a few poll intervals of the evidence.
``--all`` watches every SGLang server on this host (found in the process table, with the
log files their output goes to) and picks up servers launched later, until Ctrl-C.
The loop itself is ``core.health.follow``; this module parses arguments and prints.

Exit codes:
    0  ready (/health 200, or the log's "fired up and ready" line)
    1  internal error in eagle-tui
    2  usage error (bad arguments, a --launch command that cannot be executed)
    3  crashed (a fatal log line, or the process exited: the diagnosis names which)
    4  stalled (no log progress in a start-up phase for longer than its stall limit)
    5  port conflict (another process holds the port, or a fatal "address in use")
    6  timeout (--timeout passed before any verdict)
    7  stopped (the server received SIGTERM / is draining or exited after it)
  130  interrupted (Ctrl-C); a server started with --launch keeps running
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from eagle_tui.core.argtypes import FileFollowed, FileOut, Line, OneLineParser, Whole, seconds
from eagle_tui.core.clock import SystemClock
from eagle_tui.core.health.assemble import WatchOptions, build_watcher, is_local
from eagle_tui.core.health.changes import Change
from eagle_tui.core.health.follow import follow, follow_all
from eagle_tui.core.health.phase import STARTUP_PHASES
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import HealthSnapshot, Outcome
from eagle_tui.core.health.watcher import Watcher
from eagle_tui.core.paths import state_dir
from eagle_tui.core.proc.discover import ServerProcess
from eagle_tui.core.proc.launcher import ManagedServer
from eagle_tui.core.proc.ports import port_status
from eagle_tui.core.proc.stop import StopTimeouts, stop_process_tree
from eagle_tui.tui.cli.watch_output import Output
from eagle_tui.tui.options import server_url

EXIT_CODES: dict[Outcome, int] = {
    Outcome.READY: 0,
    Outcome.CRASHED: 3,
    Outcome.STALLED: 4,
    Outcome.PORT_CONFLICT: 5,
    Outcome.TIMEOUT: 6,
    Outcome.STOPPED: 7,
}
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

_EPILOG = """\
exit codes: 0 ready, 1 internal error, 2 usage, 3 crashed, 4 stalled, 5 port conflict,
6 timeout, 7 stopped (SIGTERM), 130 interrupted.
examples:
  eagle-tui watch --url http://127.0.0.1:30000 --log server.log --pid 12345
  eagle-tui watch --all
  eagle-tui watch --url http://127.0.0.1:30000 --launch -- python -m sglang.launch_server \\
      --model-path /models/Kimi-K2.5 --tp 8 --port 30000
"""

MAX_PID = 1 << 22  # Linux's pid_max ceiling
MAX_POLL_S = 3600.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``watch`` verb's options."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = _EPILOG
    parser.add_argument("--url", type=server_url,
                        help="server base URL, e.g. http://127.0.0.1:30000")
    parser.add_argument(
        "--all",
        action="store_true",
        help="watch every SGLang server on this host, and those started later (until Ctrl-C)",
    )
    parser.add_argument("--log", type=FileFollowed("server's log file"),
                        help="the server's log file (followed like tail -F)")
    who = parser.add_mutually_exclusive_group()
    who.add_argument("--pid", type=Whole(1, MAX_PID, "a process id"),
                     help="PID of the server's main process")
    who.add_argument(
        "--launch",
        action="store_true",
        help="start the server command given after `--` (no shell), logging to --log",
    )
    parser.add_argument("--timeout", type=seconds(), help="give up after S seconds (exit 6)")
    parser.add_argument("--json", action="store_true", help="print JSON lines instead of text")
    parser.add_argument(
        "--keep-watching", action="store_true", help="do not stop at ready; exit when it dies"
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="with --launch: stop whatever holds the port (SIGTERM, then SIGKILL) first",
    )
    parser.add_argument("--interval", type=seconds(high=MAX_POLL_S), default=1.0,
                        help="poll interval, s (1)")
    parser.add_argument("--health-timeout", type=seconds(high=MAX_POLL_S), default=3.0,
                        help="/health timeout, s (3)")
    parser.add_argument(
        "--expected", type=seconds(), default=600.0,
        help="expected start-up with no history, s (600)"
    )
    parser.add_argument(
        "--stall",
        type=seconds(),
        help="stall limit for every phase, s (default: per step, 1-10 min; see the docs)",
    )
    parser.add_argument(
        "--port-grace", type=seconds(zero=True), default=15.0,
        help="how long a port conflict may last, s (15)"
    )
    parser.add_argument("--signature", type=Line("a signature name"),
                        help="name this server's start-up history explicitly")
    parser.add_argument("--no-history", action="store_true", help="neither read nor record history")
    parser.add_argument("--history-file", type=FileOut("history file"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--url-only", action="store_true", help="no process or port access (remote server)"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="with --launch: -- CMD ...")


def run(args: argparse.Namespace) -> int:
    """Run the watch; returns the exit code (see the module docstring)."""
    command = _command(args)
    problem = _usage_problem(args, command)
    if problem is not None:
        print(f"eagle-tui watch: {problem}", file=sys.stderr)
        return EXIT_USAGE
    out = Output(sys.stdout, as_json=args.json)
    try:
        if args.all:
            return asyncio.run(_watch_all(args, out))
        return asyncio.run(_watch(args, command, out))
    except KeyboardInterrupt:
        out.final("interrupted", EXIT_INTERRUPTED, "interrupted by the user", None)
        return EXIT_INTERRUPTED


def _usage_problem(args: argparse.Namespace, command: list[str]) -> str | None:
    if args.all and (args.url or args.log or args.pid or args.launch):
        return "--all finds the servers itself: give no --url, --log, --pid or --launch"
    if not args.all and not args.url:
        return "give the server with --url URL, or watch every server with --all"
    if args.launch and not command:
        return "--launch needs a command after `--`"
    if command and not args.launch:
        return "a command was given without --launch"
    return None


def _command(args: argparse.Namespace) -> list[str]:
    command = list(args.command or [])
    return command[1:] if command[:1] == ["--"] else command


def settings_from(args: argparse.Namespace) -> WatchSettings:
    """Watch settings from the command line."""
    settings = WatchSettings(
        poll_interval_s=args.interval,
        health_timeout_s=args.health_timeout,
        default_window_s=args.expected,
        port_conflict_grace_s=args.port_grace,
    )
    if args.stall is not None:
        limits = dict.fromkeys(STARTUP_PHASES, args.stall)
        settings = replace(settings, stall_limits_s=limits, min_stall_s=min(args.stall, 30.0))
    return settings


async def _watch(args: argparse.Namespace, command: list[str], out: Output) -> int:
    clock = SystemClock()
    settings = settings_from(args)
    managed = None
    launched_at = None
    log_path: Path | None = args.log
    if args.launch:
        code = await _clear_port(args, out)
        if code is not None:
            return code
        log_path = log_path or _default_log_path()
        managed = ManagedServer(command, log_path=log_path, port=args.url.effective_port)
        try:
            managed.start()
        except OSError as exc:
            out.final("usage", EXIT_USAGE, f"cannot launch {command[0]!r}: {exc}", None)
            return EXIT_USAGE
        launched_at = clock.monotonic()
    options = WatchOptions(
        url=args.url,
        log_path=log_path,
        pid=args.pid,
        settings=settings,
        history_path=args.history_file,
        use_history=not args.no_history,
        signature=args.signature,
        process_access=not args.url_only,
    )
    watcher = build_watcher(options, clock=clock, managed=managed, launched_at=launched_at)
    _announce(out, options, managed)
    code = EXIT_INTERRUPTED
    try:
        code = await _loop(watcher, args, out)
        return code
    finally:
        await watcher.aclose()
        if managed is not None and managed.exit_code() is None:
            how = "is shutting down" if code == EXIT_CODES[Outcome.STOPPED] else "keeps running"
            print(f"server PID {managed.pid} {how}; log: {log_path}", file=sys.stderr)


def _announce(out: Output, options: WatchOptions, managed: ManagedServer | None) -> None:
    sources = [f"url {options.url.public}"]
    if options.log_path is not None:
        sources.append(f"log {options.log_path}")
    if managed is not None:
        sources.append(f"launched PID {managed.pid}")
    elif options.pid is not None:
        sources.append(f"PID {options.pid}")
    out.say("watching " + ", ".join(sources))


async def _loop(watcher: Watcher, args: argparse.Namespace, out: Output) -> int:
    noted: set[str] = set()
    async for event in follow(watcher, keep_watching=args.keep_watching, timeout=args.timeout):
        _say_blind_spots(out, event.snapshot, noted)
        if event.verdict is not None:
            code = EXIT_CODES[event.verdict.outcome]
            out.final(event.verdict.outcome.value, code, event.verdict.diagnosis, event.snapshot,
                      next_step=event.verdict.next_step)
            return code
        if event.change is not None:
            out.emit(event.change, event.snapshot)
    return EXIT_ERROR


def _say_blind_spots(out: Output, snapshot: HealthSnapshot | None, noted: set[str],
                     server: str = "") -> None:
    """Once per server: that its log was not found (so its phases and times cannot be
    seen) and how to pass it."""
    if snapshot is None or server in noted:
        return
    noted.add(server)
    for note in snapshot.notes:
        if note.startswith("log not found"):
            out.say(f"{server + ' ' if server else ''}note: {note}")


async def _watch_all(args: argparse.Namespace, out: Output) -> int:
    """Every server on this host, and those started later, until Ctrl-C or --timeout."""
    clock = SystemClock()
    settings = settings_from(args)

    def build(server: ServerProcess) -> Watcher:
        assert server.url is not None
        options = WatchOptions(
            url=server.url,
            log_path=server.log_path,
            pid=server.pid,
            settings=settings,
            history_path=args.history_file,
            use_history=not args.no_history,
        )
        return build_watcher(options, clock=clock)

    out.say("watching every SGLang server on this host (new ones are picked up); Ctrl-C stops")
    noted: set[str] = set()
    try:
        async with asyncio.timeout(args.timeout):
            async for event in follow_all(build, clock):
                _say_blind_spots(out, event.snapshot, noted, event.server)
                if event.verdict is not None:
                    out.verdict_of(event.server, event.verdict, event.snapshot)
                elif event.change is not None:
                    out.emit(event.change, event.snapshot, server=event.server)
    except TimeoutError:
        out.emit(Change("timeout", f"stopped watching after {args.timeout:g} s", {}), None)
    return 0


async def _clear_port(args: argparse.Namespace, out: Output) -> int | None:
    """Before launching: make sure nothing holds the port (the race of a quick restart)."""
    if args.url_only or not is_local(args.url):
        return None
    port = args.url.effective_port
    clock = SystemClock()
    deadline = clock.monotonic() + args.port_grace
    status = port_status(port)
    if status.bound and args.replace and status.holder_pid is not None:
        out.say(f"stopping {status.describe_holder()} which holds port {port}")
        report = await stop_process_tree(status.holder_pid, port=port, timeouts=StopTimeouts())
        for step in report.steps:
            out.emit(Change("stop", step, {"step": step}), None)
    while status.bound and clock.monotonic() < deadline:
        await clock.sleep(0.25)
        status = port_status(port)
    if not status.bound:
        return None
    diagnosis = (
        f"port {port} is held by {status.describe_holder()}; not launching a server that would "
        "load every weight and then fail to bind (stop it, or pass --replace)"
    )
    out.final(Outcome.PORT_CONFLICT.value, EXIT_CODES[Outcome.PORT_CONFLICT], diagnosis, None)
    return EXIT_CODES[Outcome.PORT_CONFLICT]


def _default_log_path() -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return state_dir() / "logs" / f"server-{stamp}.log"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``watch`` on its own (``python -m eagle_tui.tui.cli.watch``)."""
    parser = OneLineParser(prog="eagle-tui watch", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())

"""``eagle-tui demo``: everything on one machine, nothing else needed.

The dashboard paints first; then, off the UI thread, the simulated SGLang server starts as
a managed process (a start-up of about half a minute, with slow weight loading so the
expected-window flag shows) and a small capture batch starts with the bundled tokenizer
(its requests wait for the server to be ready), eight of its requests streaming. The batch
runs in a detached worker (``core.batches``), like every batch the dashboard starts.

Clean-up is the job of a keeper process (``tui.demokeeper``) started before anything else:
every process the demo starts carries the keeper's marker in its environment, and the
keeper stops them, forgets the batch's registry record and removes the run directory when
the demo quits (``q``, ctrl+c: a "stopping …" screen, back within about two seconds) or
dies (SIGHUP when an SSH connection drops, SIGTERM, a crash). ``--keep`` keeps the files
and the record (the processes are stopped all the same), and later demos leave them be.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static
from textual.worker import Worker

from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.paths import state_dir
from eagle_tui.core.proc.launcher import ManagedServer
from eagle_tui.core.tokenizer import bundled_tokenizer_path
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.app import EagleApp
from eagle_tui.tui.demokeeper import MARKER_ENV, OWNER_FILE, mark_kept
from eagle_tui.tui.options import DashboardOptions, ServerTarget
from eagle_tui.tui.render import literal
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.server import Emit, ServerFeed
from eagle_tui.tui.sources.tokenizers import TokenizerCache

log = logging.getLogger(__name__)

DEMO_WINDOW_S = 20.0
"""The demo's expected start-up window; its slowed weight loading overruns it on purpose."""
QUIT_WAIT_S = 1.6
"""How long quitting waits for the keeper's "clean" (the screen is given back after)."""
EXIT_WATCHDOG_S = 5.0
STOP_SIGNALS = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)
TOPICS = (
    "binary search",
    "a [INST] tag",
    "the [/] token",
    "list[int] in Python",
    "KV caches",
    "speculative decoding",
    "the weather in Paris",
    "a [bold markup bug",
)
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@dataclass
class Demo:
    """What the demo starts, and the keeper that stops it all."""

    workdir: Path
    server: ManagedServer
    target: ServerTarget
    batch_dir: Path
    keeper: subprocess.Popen[str] | None = None
    capture: object | None = None
    batch_id: str | None = None
    server_started: threading.Event = field(default_factory=threading.Event)
    problem: str = ""


def prepare_demo(args: argparse.Namespace) -> Demo:
    """The run directory, the keeper, and what the server will be (nothing started yet:
    this is all before the first paint, so it must be quick)."""
    base = state_dir() / "demo"
    base.mkdir(parents=True, exist_ok=True)
    # Between making the run directory and starting its keeper, nobody would clean up:
    # a hang-up or Ctrl-C then waits until the keeper runs.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        workdir = Path(tempfile.mkdtemp(prefix="run-", dir=base))
        (workdir / OWNER_FILE).write_text(f"{os.getpid()}\n")
        if args.keep:
            mark_kept(workdir)
        keeper = start_keeper(workdir)
        os.environ[MARKER_ENV] = str(workdir)  # inherited by every process started from now
        signal.signal(signal.SIGHUP, _hung_up)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "eagle_tui.core.sim",
        "--port",
        str(port),
        "--time-scale",
        str(args.time_scale),
        "--slow-phase",
        "loading_weights=3",
        "--tokens-per-s",
        str(args.tokens_per_s),
    ]
    if args.rank_hang:
        argv += ["--rank-hang", args.rank_hang]
    server = ManagedServer(argv, log_path=workdir / "sim.log", port=port)
    target = ServerTarget(
        ServerURL("http", "127.0.0.1", port),
        name="demo-sim",
        log_file=workdir / "sim.log",
        argv=tuple(argv),
    )
    return Demo(workdir, server, target, workdir / "batch", keeper=keeper)


def _hung_up(signum: int, frame: object) -> None:
    """The terminal is gone (an SSH connection dropped): nothing to restore or show, and a
    Textual exit may wait on a reader of the dead terminal. Leave now; the keeper sees its
    pipe close and cleans up."""
    os._exit(128 + signum)


def start_keeper(workdir: Path) -> subprocess.Popen[str]:
    """The keeper, in a session of its own, without the marker (it must not stop itself)."""
    env = {k: v for k, v in os.environ.items() if k != MARKER_ENV}
    logs = state_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / "demo-keeper.log", "a", encoding="utf-8") as log_file:
        return subprocess.Popen(
            [sys.executable, "-m", "eagle_tui.tui.demokeeper", "--run", str(workdir),
             "--owner", str(os.getpid()), "--registry", str(state_dir() / "batches")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file, text=True,
            env=env, start_new_session=True, close_fds=True,
        )


def free_port() -> int:
    """A TCP port free now on 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def demo_options(demo: Demo, args: argparse.Namespace) -> DashboardOptions:
    """The dashboard's options for the demo."""
    return DashboardOptions(
        servers=(demo.target,),
        shard_dirs=(demo.batch_dir,),
        tokenizer=bundled_tokenizer_path(),
        theme=args.theme,
        mouse=not args.no_mouse,
        refresh_s=getattr(args, "refresh", None) or 1.0,
    )


class StartingFeed(ServerFeed):
    """A ``ServerFeed`` that starts watching once the demo has started the server (the
    dashboard paints before that)."""

    def __init__(self, demo: Demo, **kwargs: object) -> None:
        super().__init__(demo.target, managed=demo.server, **kwargs)  # type: ignore[arg-type]
        self._started = demo.server_started

    def run(self, stop: threading.Event, emit: Emit) -> None:
        while not self._started.wait(0.05):
            if stop.is_set():
                return
        super().run(stop, emit)


def demo_sources(demo: Demo) -> Sources:
    """The demo server's feed (managed: restart and stop work), its capture, tokenizers."""
    from eagle_tui.tui.sources import LazyCapture

    settings = WatchSettings(default_window_s=DEMO_WINDOW_S)
    capture = LazyCapture()
    demo.capture = capture
    return Sources(
        servers=(StartingFeed(demo, settings=settings, use_history=False),),
        capture=capture,  # type: ignore[arg-type]
        tokenizers=TokenizerCache(),
        shard_dirs=(str(demo.batch_dir),),
    )


def start_demo(demo: Demo, app: EagleApp, args: argparse.Namespace) -> None:
    """Start the server, then the batch (in a detached worker; its requests wait until
    the server is ready), and watch 8 of its requests. Blocking: run it off the UI."""
    demo.server.start()
    demo.server_started.set()
    prompts = write_prompts(demo.workdir / "prompts.jsonl", args.prompts)
    from eagle_tui.tui.sources.capture import BatchRequest

    request = BatchRequest(
        prompts,
        demo.batch_dir,
        (demo.target.url.public,),
        bundled_tokenizer_path(),
        preset="kimi",
        concurrency=8,
        max_new_tokens=512,
        shard_rows=25,
        shard_max_age_s=10.0,
    )
    capture = app.sources.capture
    assert capture is not None
    batch_id = capture.start(request)
    demo.batch_id = batch_id
    capture.watch(batch_id, 8)
    app.watching = batch_id
    app.auto_watch = True


def write_prompts(path: Path, count: int) -> Path:
    """A prompts file: questions on a few topics, every third one offering a tool."""
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            topic = TOPICS[i % len(TOPICS)]
            record: dict[str, object] = {
                "id": f"demo-{i:04d}",
                "messages": [{"role": "user", "content": f"({i}) Explain {topic} briefly."}],
            }
            if i % 3 == 0:
                record["tools"] = [WEATHER_TOOL]
            out.write(json.dumps(record) + "\n")
    return path


def finish_demo(demo: Demo, *, keep: bool = False, wait_s: float = QUIT_WAIT_S) -> bool:
    """Ask the keeper to stop everything now; True when it said it is done within
    ``wait_s``. With ``keep`` the run directory and the record stay (the processes are
    stopped all the same)."""
    keeper = demo.keeper
    if keeper is None or keeper.stdin is None or keeper.stdout is None:
        return True
    try:
        keeper.stdin.write("quit keep\n" if keep else "quit\n")
        keeper.stdin.flush()
    except (OSError, ValueError):
        return False
    ready, _, _ = select.select([keeper.stdout], [], [], wait_s)
    clean = bool(ready) and keeper.stdout.readline().strip() == "clean"
    with contextlib.suppress(OSError, ValueError):
        keeper.stdin.close()
    return clean


class StoppingScreen(ModalScreen[None]):
    """What quitting the demo shows while the keeper stops everything."""

    BINDINGS: ClassVar[list[BindingType]] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Static(
                Content(
                    "stopping the demo: aborting the batch, stopping the simulated server, "
                    "removing its files …"
                ),
                id="confirm-question",
            )


class DemoApp(EagleApp):
    """The dashboard, plus the demo's start after the first paint and its clean quit."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, id="demo.ctrl_c"),
    ]

    def __init__(self, demo: Demo, args: argparse.Namespace) -> None:
        super().__init__(demo_options(demo, args), sources=demo_sources(demo))
        self.demo = demo
        self.demo_args = args
        self.stopping: Worker[None] | None = None
        """The quit's worker (the keeper stops everything, then the app leaves), once asked."""

    def on_mount(self) -> None:
        super().on_mount()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):  # SIGHUP: see ``_hung_up``
            loop.add_signal_handler(signum, self._quit_soon)
        self.call_after_refresh(self._start_in_background)

    def _start_in_background(self) -> None:
        # A daemon thread, not a Textual thread worker: those run in the loop's default
        # executor, which the exit joins, and a quit during the start must not wait for the
        # batch's launch (up to its ready timeout, 120 s).
        def start() -> None:
            try:
                start_demo(self.demo, self, self.demo_args)
            except Exception as exc:  # say why; quitting still cleans up
                log.exception("the demo could not start")
                self.demo.problem = f"{type(exc).__name__}: {exc}"
                self._from_thread(self._report_problem)

        threading.Thread(target=start, name="demo-start", daemon=True).start()

    def _report_problem(self) -> None:
        self.notify(literal.shown(self.demo.problem), title="Demo", severity="error", markup=False,
                    timeout=30)

    def _from_thread(self, callback: Callable[[], object]) -> None:
        # the app has stopped (RuntimeError) or is stopping and cancelled the call: either
        # way nothing is left to tell, and a traceback on the way out would only alarm
        with contextlib.suppress(RuntimeError, concurrent.futures.CancelledError):
            self.call_from_thread(callback)

    def _quit_soon(self) -> None:
        self.call_later(self.action_quit)

    async def action_quit(self) -> None:
        """Show "stopping …", have the keeper stop everything, then leave."""
        if self.stopping is not None:
            return
        self.push_screen(StoppingScreen())
        if not self.is_headless:  # a real terminal may hang a write; tests have none
            _exit_watchdog()
        self.stopping = self._stop_demo()

    @work(thread=True, group="demo-stop", exit_on_error=False)
    def _stop_demo(self) -> None:
        """Have the keeper stop everything (blocking, up to ``QUIT_WAIT_S``), then leave."""
        began = time.monotonic()
        clean = finish_demo(self.demo, keep=self.demo_args.keep)
        log.info("demo: keeper %s after %.2f s", "done" if clean else "still working",
                 time.monotonic() - began)
        self._from_thread(self.exit)


def _exit_watchdog() -> None:
    """If leaving hangs (a terminal that went away mid-write), leave anyway: the keeper
    cleans up whatever happens to this process."""
    timer = threading.Timer(EXIT_WATCHDOG_S, os._exit, args=(1,))
    timer.daemon = True
    timer.start()

"""``eagle-tui demo``: everything on one machine, nothing else needed.

Starts the simulated SGLang server as a managed process (a start-up of about half a minute,
with slow weight loading so the expected-window flag shows), starts a small capture batch
with the bundled tokenizer as soon as it can (requests wait for the server to be ready),
streams eight of its requests, and opens the dashboard on all of it. The batch runs in a
detached worker (``core.batches``), like every batch the dashboard starts. Quitting aborts
the batch and waits for its worker to exit, stops the server and removes the demo's files
and registry record (``--keep`` keeps them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.paths import state_dir
from eagle_tui.core.proc.launcher import ManagedServer
from eagle_tui.core.proc.stop import StopTimeouts
from eagle_tui.core.tokenizer import bundled_tokenizer_path
from eagle_tui.tui.options import DashboardOptions, ServerTarget
from eagle_tui.tui.sources import Sources
from eagle_tui.tui.sources.batches import DetachedCapture
from eagle_tui.tui.sources.capture import BatchRequest
from eagle_tui.tui.sources.server import ServerFeed
from eagle_tui.tui.sources.tokenizers import TokenizerCache

log = logging.getLogger(__name__)

DEMO_WINDOW_S = 20.0
"""The demo's expected start-up window; its slowed weight loading overruns it on purpose."""
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
    """What the demo started (so it can all be stopped)."""

    workdir: Path
    server: ManagedServer
    target: ServerTarget
    capture: DetachedCapture
    batch_dir: Path
    batch_id: str | None = None


def start_demo(args: argparse.Namespace) -> Demo:
    """Launch the simulated server (managed) and prepare the demo's directory."""
    base = state_dir() / "demo"
    base.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="run-", dir=base))
    port = _free_port()
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
    server = ManagedServer(argv, log_path=workdir / "sim.log", port=port)
    pid = server.start()
    url = f"http://127.0.0.1:{port}"
    target = ServerTarget(
        url, name="demo-sim", log_file=workdir / "sim.log", argv=tuple(argv), pid=pid
    )
    return Demo(workdir, server, target, DetachedCapture(), workdir / "batch")


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


def demo_sources(demo: Demo) -> Sources:
    """The demo server's feed (managed: restart and stop work), its capture, tokenizers."""
    settings = WatchSettings(default_window_s=DEMO_WINDOW_S)
    feed = ServerFeed(demo.target, settings=settings, managed=demo.server, use_history=False)
    return Sources(
        servers=(feed,),
        capture=demo.capture,
        tokenizers=TokenizerCache(),
        shard_dirs=(str(demo.batch_dir),),
    )


def start_batch(demo: Demo, app: object, args: argparse.Namespace) -> None:
    """Start the demo batch in a detached worker (its requests wait until the server is
    ready) and watch 8. Blocks until the worker dispatches (its tokenizer is loaded)."""
    prompts = write_prompts(demo.workdir / "prompts.jsonl", args.prompts)
    request = BatchRequest(
        prompts,
        demo.batch_dir,
        (demo.target.url,),
        bundled_tokenizer_path(),
        preset="kimi",
        concurrency=8,
        max_new_tokens=512,
        shard_rows=25,
        shard_max_age_s=10.0,
    )
    batch_id = demo.capture.start(request)
    demo.batch_id = batch_id
    demo.capture.watch(batch_id, 8)
    app.watching = batch_id  # type: ignore[attr-defined]
    app.auto_watch = True  # type: ignore[attr-defined]


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


def stop_demo(demo: Demo, *, keep: bool) -> None:
    """Abort the batch (waiting for its worker to exit), stop the server, remove the files
    and the batch's registry record (unless ``keep``)."""
    try:
        if demo.batch_id is not None and not demo.capture.abort_and_wait(demo.batch_id):
            log.error("the demo batch's worker did not exit")
        demo.capture.close()
        if demo.batch_id is not None and not keep:
            demo.capture.registry.forget(demo.batch_id)
    except Exception:  # clean-up goes on whatever happened
        log.exception("stopping the demo batch failed")
    stop_server(demo.server)
    if keep:
        print(f"eagle-tui demo: batch and logs kept in {demo.workdir}")
    else:
        shutil.rmtree(demo.workdir, ignore_errors=True)


def stop_server(server: ManagedServer) -> None:
    """Stop the server on a private event loop in its own thread (works whether or not the
    caller is inside an event loop)."""
    timeouts = StopTimeouts(term_s=10.0, kill_s=5.0, release_s=5.0)

    def stop() -> None:
        try:
            asyncio.run(server.stop(timeouts))
        except Exception:  # clean-up goes on whatever happened
            log.exception("stopping the demo server failed")

    worker = threading.Thread(target=stop, name="demo-stop")
    worker.start()
    worker.join()


def _free_port() -> int:
    from eagle_tui.core.sim.launcher import free_port

    return free_port()

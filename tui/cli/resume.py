"""``eagle-tui resume BATCH [--server URL ...]``: continue a paused batch, or restart one.

A paused batch (its worker runs) is resumed at once. A batch whose worker ended before
finishing (interrupted, stopped, failed) gets a new detached worker that continues it:
rows already in complete shards are skipped, everything else is captured exactly once.
The API key comes only from what is given now: ``--api-key-file`` or ``EAGLE_TUI_API_KEY``
(nothing stored is trusted with it); ``--server`` replaces the recorded servers (a moved
server, or URLs that carry credentials, which the registry never stores). The record
itself is used only if it is safely yours (``core.trust``).
Exit status: see ``tui.cli.batch_verbs``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from eagle_tui.core.argtypes import FileIn
from eagle_tui.core.batches.control_client import BatchClient
from eagle_tui.core.batches.detach import relaunch
from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.batches.survey import RESUMABLE_STATES, BatchView
from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.errors import ConfigError, WrongState
from eagle_tui.core.sglang.apikey import read_api_key
from eagle_tui.core.sglang.client import API_KEY_ENV
from eagle_tui.core.text import terminal_safe
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.cli.batch_verbs import (
    EXIT_OK,
    EXIT_USAGE,
    add_batch_argument,
    describe_launch,
    find_view,
    run_verb,
)
from eagle_tui.tui.options import server_url


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``resume`` verb's arguments."""
    add_batch_argument(parser)
    parser.add_argument("--server", action="append", default=None, type=server_url, metavar="URL",
                        help="send to this server instead of the recorded ones (repeatable)")
    parser.add_argument("--api-key-file", type=FileIn("API key file"), default=None,
                        metavar="FILE",
                        help=f"file holding the API key (default: ${API_KEY_ENV})")
    parser.add_argument("--retry-failed", action="store_true",
                        help="also resend rows that failed as too long for the context")


def run(args: argparse.Namespace) -> int:
    """Resume or restart one batch."""
    servers = tuple(args.server) if args.server else None
    try:
        api_key = _api_key(args.api_key_file)
    except ConfigError as e:
        print(f"eagle-tui resume: --api-key-file: {e}", file=sys.stderr)
        return EXIT_USAGE
    return run_verb(lambda: _resume(args.batch, servers, api_key, args.retry_failed))


def _api_key(path: Path | None) -> str | None:
    if path is None:
        return os.environ.get(API_KEY_ENV) or None
    return read_api_key(path)


async def _resume(ref: str, servers: tuple[ServerURL, ...] | None, api_key: str | None,
                  retry_failed: bool = False) -> int:
    registry = Registry()
    view = await find_view(ref, registry)
    if view.state in ("paused", "running", "stopping"):
        return await _unpause(view)
    if view.state not in RESUMABLE_STATES:
        raise WrongState(f"batch {view.record.id} is {view.state}; nothing to resume"
                         + ("" if view.state == "done" else f" (see {view.record.log})"))
    if view.record.needs_secrets and not (servers or api_key):
        print("note: this batch was started with an API key or credentials in a server URL; "
              f"they are not stored: set {API_KEY_ENV} (or --api-key-file) / pass --server "
              "again if needed")
    launched = relaunch(view.record, registry, servers=servers, api_key=api_key,
                        retry_failed=retry_failed)
    print(describe_launch(launched))
    return EXIT_OK


async def _unpause(view: BatchView) -> int:
    if view.state == BatchState.STOPPING:
        raise WrongState(f"batch {view.record.id} is stopping; resume it once it has stopped")
    async with BatchClient(view.record.socket) as client:
        answer = await client.resume()
    print(terminal_safe(f"batch {view.record.id} is {answer.state}"))
    return EXIT_OK

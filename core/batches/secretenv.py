"""Handing a worker the secrets its config must not store: API key and raw server URLs.

They travel in the worker's environment only (never in the registry, the log or argv,
which other users can read in the process table).
"""

from __future__ import annotations

import json
import os

from eagle_tui.core.capture.config import CaptureConfig, public_url
from eagle_tui.core.sglang.client import API_KEY_ENV

SERVERS_ENV = "EAGLE_TUI_BATCH_SERVERS"
"""JSON list of the server URLs as given, set only when one carries credentials."""


def has_secrets(config: CaptureConfig) -> bool:
    """True when the config holds something the registry does not keep."""
    return bool(config.api_key) or any(public_url(u) != u.rstrip("/") for u in config.servers)


def worker_env(config: CaptureConfig, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a worker of ``config``: ``base`` (default ours) plus secrets."""
    env = dict(os.environ if base is None else base)
    env.pop(SERVERS_ENV, None)
    if config.api_key:
        env[API_KEY_ENV] = config.api_key
    if any(public_url(u) != u.rstrip("/") for u in config.servers):
        env[SERVERS_ENV] = json.dumps(list(config.servers))
    return env


def secrets_from_env() -> tuple[str | None, tuple[str, ...] | None]:
    """(API key, raw server URLs) from our environment; None where not given."""
    raw = os.environ.get(SERVERS_ENV)
    servers = tuple(str(u) for u in json.loads(raw)) if raw else None
    return os.environ.get(API_KEY_ENV) or None, servers

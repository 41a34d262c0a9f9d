"""Handing a worker the secrets its config must not store: API key and server URLs' user info.

They travel in the worker's environment only (never in the registry, the log or argv,
which other users can read in the process table).
"""

from __future__ import annotations

import os

import msgspec

from eagle_tui.core.capture.config import CaptureConfig
from eagle_tui.core.errors import BadURL, ConfigError
from eagle_tui.core.sglang.client import API_KEY_ENV
from eagle_tui.core.urls import ServerURL
from eagle_tui.core.wire import ENCODER, explain

SERVERS_ENV = "EAGLE_TUI_BATCH_SERVERS"
"""JSON list of the server URLs with their user info, set only when one carries it."""


def has_secrets(config: CaptureConfig) -> bool:
    """True when the config holds something the registry does not keep."""
    return bool(config.api_key) or any(u.userinfo for u in config.servers)


def worker_env(config: CaptureConfig, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a worker of ``config``: ``base`` (default ours) plus secrets."""
    env = dict(os.environ if base is None else base)
    env.pop(SERVERS_ENV, None)
    if config.api_key:
        env[API_KEY_ENV] = config.api_key
    if any(u.userinfo for u in config.servers):
        env[SERVERS_ENV] = ENCODER.encode([u.for_requests for u in config.servers]).decode()
    return env


def secrets_from_env() -> tuple[str | None, tuple[ServerURL, ...] | None]:
    """(API key, server URLs with their user info) from our environment; None where not
    given. ConfigError when the server list is not a JSON list of server URLs."""
    raw = os.environ.get(SERVERS_ENV)
    try:
        servers = tuple(ServerURL.parse(u) for u in _SERVERS.decode(raw)) if raw else None
    except (msgspec.DecodeError, BadURL) as e:
        detail = explain(e) if isinstance(e, msgspec.DecodeError) else str(e)
        raise ConfigError(f"{SERVERS_ENV} must be a JSON list of server URLs ({detail}); "
                          "unset it, or pass --server URL") from None
    return os.environ.get(API_KEY_ENV) or None, servers


_SERVERS = msgspec.json.Decoder(tuple[str, ...])

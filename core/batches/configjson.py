"""``CaptureConfig`` to JSON and back, for the registry record a detached worker starts from.

Secrets never go into the JSON: the API key is left out and server URLs are stored without
user info or query (``public_url``). A worker gets the real ones through its environment
(see ``core.batches.secretenv``); a resume from a new shell needs them supplied again.

The conversion follows the dataclass's own type hints, so a field the engine adds later
round-trips without a change here as long as it is a path, number, string, bool, mapping,
tuple or a nested frozen dataclass.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eagle_tui.core.capture.config import CaptureConfig, public_url
from eagle_tui.core.errors import ConfigError

_SECRET_FIELDS = frozenset({"api_key"})


def config_to_json(config: CaptureConfig) -> dict[str, Any]:
    """A JSON-ready dict of ``config`` without secrets (see the module docstring)."""
    data: dict[str, Any] = {}
    for item in dataclasses.fields(config):
        if item.name in _SECRET_FIELDS:
            continue
        data[item.name] = _encode(getattr(config, item.name))
    data["servers"] = [public_url(url) for url in config.servers]
    return data


def config_from_json(
    data: Mapping[str, Any], *, api_key: str | None = None,
    servers: tuple[str, ...] | None = None, **overrides: Any,
) -> CaptureConfig:
    """Rebuild a ``CaptureConfig``; ``servers``/``api_key`` restore what was kept secret.

    Unknown keys (written by a newer eagle-tui) are ignored; ConfigError when a value no
    longer fits the config.
    """
    hints = typing.get_type_hints(CaptureConfig)
    values: dict[str, Any] = {}
    for item in dataclasses.fields(CaptureConfig):
        if item.name in data and item.name not in _SECRET_FIELDS:
            values[item.name] = _decode(hints[item.name], data[item.name])
    if servers:
        values["servers"] = servers
    values.update(overrides)
    try:
        return CaptureConfig(**values, api_key=api_key)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"stored batch config cannot be used ({e}); start a new batch") from e


def _encode(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_encode(v) for v in value]
    return value


def _decode(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _decode(options[0], value) if len(options) == 1 else value
    if hint is Path:
        return Path(value)
    if origin is tuple:
        args = typing.get_args(hint)
        return tuple(_decode(args[0], v) for v in value) if args else tuple(value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        inner = typing.get_type_hints(hint)
        names = {f.name for f in dataclasses.fields(hint)}
        return hint(**{k: _decode(inner[k], v) for k, v in value.items() if k in names})
    if origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
        return dict(value)
    return value

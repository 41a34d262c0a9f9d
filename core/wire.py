"""Typed JSON shapes: one ``msgspec.Struct`` declares each document, and encodes and decodes it.

Every JSON document that crosses a process or a file (the batch control API, registry
records, the stored batch config, ``manifest.json``, the dashboard's ``config.toml``,
SGLang's ``/generate`` answers) is declared once as a struct next to the code that owns it;
``msgspec.json.Decoder(Shape)`` checks types while it parses, so a value of the wrong type
is refused where it enters, with the path of the field (``$.progress.done``), instead of
failing somewhere downstream.

- ``Wire``: base of the control API's shapes (immutable, keyword-built, unknown fields
  ignored so an older reader accepts a newer writer);
- ``where_what(error)`` / ``explain(error)``: msgspec's error as ``field.path: problem``;
- ``ENCODER``: one shared compact encoder (structs, dataclasses, enums, builtins).

Open-ended values that eagle-tui only passes through (sampling parameters and template
arguments given on the command line) are ``dict[str, object]``: any JSON value, which a
reader has to narrow before use.
"""

from __future__ import annotations

import re

import msgspec

ENCODER = msgspec.json.Encoder()
"""Compact JSON of any struct, dataclass, enum or builtin (thread-safe, reusable)."""

_AT = re.compile(r" - at `\$(?P<path>[^`]*)`$")


def where_what(error: msgspec.MsgspecError, *, root: str = "") -> tuple[str, str]:
    """(field path, problem) of a decode error; the path is prefixed with ``root``.

    ``Expected `int`, got `str` - at `$.progress.done``` gives ``("progress.done",
    "Expected `int`, got `str`")``; an error at the document's top level has the path
    ``root``.
    """
    text = str(error)
    match = _AT.search(text)
    path = match["path"] if match else ""
    problem = text[: match.start()] if match else text
    path = f"{root}{path}" if root else path.lstrip(".")
    return path, problem


def explain(error: msgspec.MsgspecError, *, root: str = "") -> str:
    """``path: problem`` (or just the problem at the top level)."""
    path, problem = where_what(error, root=root)
    return f"{path}: {problem}" if path else problem


class Wire(msgspec.Struct, frozen=True, kw_only=True):
    """Base of the control API's shapes: immutable, built by keyword, unknown fields ignored."""


__all__ = ["ENCODER", "Wire", "explain", "where_what"]

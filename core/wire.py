"""Typed JSON shapes: one ``msgspec.Struct`` declares each document, and encodes and decodes it.

Every JSON document that crosses a process or a file (the batch control API, registry
records, the stored batch config, ``manifest.json``, the lines of ``failures.jsonl`` and
``rejects.jsonl``, an export's manifest, the ``--json`` outputs, the dashboard's
``config.toml``, SGLang's ``/generate`` answers) is declared once as a struct next to the
code that owns it; ``msgspec.json.Decoder(Shape)`` checks types while it parses, so a value
of the wrong type is refused where it enters, with the path of the field
(``$.progress.done``), instead of failing somewhere downstream.

- ``Wire``: base of the control API's shapes (immutable, keyword-built, unknown fields
  ignored so an older reader accepts a newer writer);
- ``where_what(error)`` / ``explain(error)``: msgspec's error as ``field.path: problem``;
- ``ENCODER``: one shared compact encoder (structs, dataclasses, enums, builtins, paths and
  ``TextValue``s); ``printable_json``: its output for a terminal (non-ASCII escaped);
  ``json_line``: its output as a line of a JSONL file (a lone surrogate escaped), read
  back by ``parse_json_line``;
- ``TextValue``: base of value types a document holds as text (``--shard``'s ``"2/5"``);
  ``enc_hook``/``dec_hook`` write and read them, and paths, for any encoder or decoder
  (``decoder(Shape)`` is a JSON decoder with them).

Open-ended values that eagle-tui only passes through (sampling parameters and template
arguments given on the command line) are ``dict[str, object]``: any JSON value, which a
reader has to narrow before use.
"""

from __future__ import annotations

import json
import re
from pathlib import PurePath
from typing import Self, TypeVar

import msgspec


class TextValue:
    """Base of value types a JSON document holds as text: written as ``str(value)``, read
    back with ``cls.parse(text)``; a text ``parse`` refuses is a decode error naming the field.
    """

    __slots__ = ()

    @classmethod
    def parse(cls, text: str) -> Self:
        """The value ``text`` spells (any exception: not one)."""
        raise NotImplementedError


def enc_hook(value: object) -> object:
    """What msgspec writes for the types it does not know: paths and ``TextValue``s as text."""
    if isinstance(value, PurePath | TextValue):
        return str(value)
    raise NotImplementedError(f"no JSON form for {type(value).__name__}")


def dec_hook(kind: type, value: object) -> object:
    """The value of type ``kind`` that ``enc_hook`` wrote as ``value``."""
    if kind is object:  # msgspec asks about ``object`` (any JSON value) too once hooked
        return value
    if not (isinstance(kind, type) and issubclass(kind, PurePath | TextValue)):
        raise NotImplementedError(f"no JSON form for {kind!r}")
    if not isinstance(value, str):
        raise TypeError(f"Expected `str`, got `{_json_type(value)}`")
    if issubclass(kind, PurePath):
        return kind(value)
    try:
        return kind.parse(value)
    except Exception as e:  # msgspec adds the field's path to a ValueError
        raise ValueError(str(e)) from e


T = TypeVar("T")


def decoder(shape: type[T]) -> msgspec.json.Decoder[T]:
    """A JSON decoder of ``shape`` that reads paths and ``TextValue``s."""
    return msgspec.json.Decoder(shape, dec_hook=dec_hook)


def _json_type(value: object) -> str:
    names = {bool: "bool", int: "int", float: "float", list: "array", dict: "object"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


ENCODER = msgspec.json.Encoder(enc_hook=enc_hook)
"""Compact JSON of any struct, dataclass, enum, builtin, path or ``TextValue`` (thread-safe,
reusable)."""



def json_line(value: object) -> str:
    """``value`` as one compact JSON line (no newline), for a JSONL file. Text from a
    prompt or a server may hold a lone surrogate (a JSON ``\\udXXX`` escape decodes to
    one): msgspec cannot write it, so that line is written escaped, as JSON allows and
    ``json.loads`` reads back."""
    try:
        return ENCODER.encode(value).decode()
    except UnicodeEncodeError:
        return json.dumps(msgspec.to_builtins(value, enc_hook=enc_hook))


def parse_json_line(text: str, shape: type[T]) -> T | None:
    """The ``shape`` a JSONL line holds; None for a line torn by a crash or of another shape.
    Read by ``json`` first: a line ``json_line`` wrote escaped may hold a lone surrogate,
    which msgspec's parser refuses."""
    try:
        return msgspec.convert(json.loads(text), shape, dec_hook=dec_hook)
    except (ValueError, RecursionError, msgspec.ValidationError):
        return None


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def printable_json(value: object, *, indent: int | None = None) -> str:
    """``value`` as JSON text with every non-ASCII character escaped (``\\u00e9``), as
    ``json.dumps`` writes it: what a ``--json`` output prints. msgspec writes text as UTF-8,
    and a terminal runs the C1 controls (``\\x9b`` is CSI) and bidi overrides that a batch
    name, a path or a server's answer may hold; escaped, they are data again."""
    data = ENCODER.encode(value)
    if indent is not None:
        data = msgspec.json.format(data, indent=indent)
    return _NON_ASCII.sub(_escaped, data.decode())


def _escaped(match: re.Match[str]) -> str:
    code = ord(match[0])
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # above the BMP: a UTF-16 surrogate pair, as JSON spells it
    return f"\\u{0xD800 | code >> 10:04x}\\u{0xDC00 | code & 0x3FF:04x}"


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


__all__ = ["ENCODER", "TextValue", "Wire", "dec_hook", "decoder", "enc_hook", "explain",
           "json_line", "parse_json_line", "printable_json", "where_what"]

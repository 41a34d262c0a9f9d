"""``--json`` outputs print non-ASCII escaped (``core.wire.printable_json``), as ``json.dumps``
did before they were encoded with msgspec: a C1 control (``\\x9b`` is CSI to a terminal), a
bidi override or an emoji in a batch name or path reaches the terminal as ``\\uXXXX``."""

from __future__ import annotations

import json

import msgspec

from eagle_tui.core.wire import printable_json

HOSTILE = "b\x9b31mé\u202eΩ🦅\x1b]0;x\x07"


class Named(msgspec.Struct):
    name: str
    rows: int


def test_non_ascii_is_escaped_like_json_dumps() -> None:
    value = {"name": HOSTILE, "paths": [HOSTILE, "plain"], "n": 3, "none": None}
    assert printable_json(value, indent=1) == json.dumps(value, indent=1)
    compact = printable_json(value)
    assert compact.isascii() and all(c.isprintable() for c in compact)
    assert json.loads(compact) == value


def test_structs_print_the_same_way() -> None:
    text = printable_json([Named(HOSTILE, 2)])
    assert text.isascii() and "\\u009b" in text and "\\ud83e\\udd85" in text
    assert json.loads(text) == [{"name": HOSTILE, "rows": 2}]

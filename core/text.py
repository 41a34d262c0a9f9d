"""Text for people, one way everywhere: durations, clipped one-liners, quoted evidence, counts.

Every view and verb formats through here, so 90 seconds reads ``1m30s`` in the watch output,
the dashboard, the capture summary and the batch table alike.
"""

from __future__ import annotations

from collections.abc import Mapping


def duration(seconds: float | None, unknown: str = "?") -> str:
    """``42s``, ``5m12s``, ``1h03m``; ``unknown`` for None. Rounds to the nearest second."""
    if seconds is None:
        return unknown
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def byte_size(size: int) -> str:
    """``512 B``, ``48.9 KiB``, ``3.0 MiB``, ``1.2 GiB``: never ``0.0 MiB`` for a small file."""
    value = float(size)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{size} B" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} GiB"


def clip(text: str, limit: int = 160) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def quote(text: str | None, limit: int = 160) -> str:
    """Text quoted for evidence; ``(none)`` when absent. Text from others (a log line)
    goes through ``core.outside.quote``, which makes it clean first."""
    return "(none)" if text is None else repr(clip(text, limit))


def counted(count: int, noun: str, plural: str = "") -> str:
    """``1 start-up``, ``3 start-ups`` (``plural`` when adding an ``s`` is wrong)."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def known(*pieces: tuple[str, object]) -> list[str]:
    """The ``(template, value)`` pieces whose value is known (not None), each value put in
    its template: ``known(("queued {:g}", 3), ("{:.0f} tok/s", None))`` is ``["queued 3"]``."""
    return [template.format(value) for template, value in pieces if value is not None]


def counts_text(kinds: Mapping[str, int]) -> str:
    """``busy 3, timeout 1`` (largest first), or ``none``."""
    if not kinds:
        return "none"
    return ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))


# -- text from outside, made harmless ------------------------------------------------------

_ESC = 0x1B
_DEL = 0x7F
_BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
"""Embedding, override and isolate controls: they reorder what a terminal shows."""


def _visible_table(*, multiline: bool) -> dict[int, str]:
    table: dict[int, str] = {c: chr(0x2400 + c) for c in range(0x20)}  # ␀ … ␟, ␛ for ESC
    table[_ESC] = "␛"
    table[_DEL] = "␡"
    table[ord("\t")] = "\t"  # a tab moves the cursor right, nothing else
    if multiline:
        table[ord("\n")] = "\n"
    table.update({c: f"\\x{c:02x}" for c in range(0x80, 0xA0)})  # C1: 0x9b is CSI, 0x9d OSC
    table.update({c: f"<U+{c:04X}>" for c in _BIDI})
    table.update({c: f"\\u{c:04x}" for c in range(0xD800, 0xE000)})  # lone surrogates
    table.update({0x2028: "<U+2028>", 0x2029: "<U+2029>"})
    return table


_ONE_LINE = _visible_table(multiline=False)
_MULTILINE = _visible_table(multiline=True)


def terminal_safe(text: str, *, multiline: bool = False) -> str:
    """``text`` with every control and escape character shown, never interpreted.

    ESC becomes ``␛`` (so ``\\x1b]0;title\\x07`` shows as ``␛]0;title␇``), the other C0
    controls their control pictures (``␍`` for a carriage return, ``␊`` for a newline unless
    ``multiline``), DEL ``␡``, C1 controls ``\\x9b``, bidi overrides ``<U+202E>`` and lone
    surrogates ``\\udc80``. Tabs stay. Use it on every string from a server, a log, a prompt
    file, a shard or a batch name before it reaches a terminal (Rich and Textual pass ESC
    through as it is).
    """
    if text.isprintable():  # the common case, one C pass
        return text
    return text.translate(_MULTILINE if multiline else _ONE_LINE)


def utf8_safe(text: str) -> str:
    """``text`` unchanged when it encodes as UTF-8; else with lone surrogates written as
    ``\\udc80`` (a file written with strict UTF-8 would otherwise fail on them)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text

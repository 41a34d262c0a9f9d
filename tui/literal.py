"""Text from outside shown literally in the dashboard: no control or escape sequence passes.

Server logs, server answers, prompt files, shards and batch names are written by others, and
a terminal executes what they hold: ``ESC ] 0 ;`` retitles the window, ``ESC ] 52 ;`` writes
the clipboard, other sequences change the keyboard mode (``q`` stops working). Rich's
``Text`` and Textual's ``Content`` remove only BEL, BS, VT, FF and CR from the strings they
are built from; ESC, the other C0/C1 controls, DEL, bidi overrides and lone surrogates pass
through to the terminal.

:func:`install` widens that one filter, which every ``Text``/``Content`` made from a plain
string goes through (the log, tables, cards, toasts, token views; ``inspect``'s and
``stats``' Rich output), to show those characters as ``core.text.terminal_safe`` does
(``␛]0;…``); newlines and tabs keep their meaning. It is the single point where outside text
enters the screen, so a widget added later is covered too. The dashboard installs it for
Rich and Textual, the CLI for Rich only (verbs never load Textual); the log pane and the
verbs that print plain strings make their text safe themselves as well.
``tests/tui/test_tui_escapes.py`` fails if a Textual or Rich upgrade moves the filter.
"""

from __future__ import annotations

from typing import Any, cast

import rich.control

from eagle_tui.core.text import terminal_safe

_SHOWN: dict[int, str] = {
    code: terminal_safe(chr(code), multiline=True)
    for code in (*range(0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F),
                 *range(0x2066, 0x206A), 0x2028, 0x2029, *range(0xD800, 0xE000))
    if chr(code) not in "\n\t"
}


def install(*, textual: bool = True) -> None:
    """Show control characters visibly in every Rich ``Text`` (and, with ``textual``, every
    Textual ``Content``) made from a string; idempotent, process-wide. What the libraries
    already remove (BEL, BS, VT, FF, CR) stays removed."""
    for table in _filter_tables(textual=textual):
        for code, shown in _SHOWN.items():
            table.setdefault(code, shown)


def _filter_tables(*, textual: bool) -> list[dict[int, str | None]]:
    """The translate tables Rich and Textual strip control codes with (mutated in place:
    they are the default arguments of their strip functions)."""
    tables: list[Any] = [rich.control._CONTROL_STRIP_TRANSLATE]
    if textual:
        from textual import content

        tables.append(content._CONTROL_STRIP_TRANSLATE)
    return [cast(dict[int, str | None], table) for table in tables]

"""Every key named in a binding of the dashboard is a key Textual can receive from a terminal.

A binding on a name Textual never produces (``bracketright`` for ``]``) is silently dead: it
shows in the footer and the help, and nothing happens. The names Textual produces are its
public ``textual.keys.Keys`` (every non-printable key and modifier combination its parser
emits) and, for a printable character, the name Textual derives from the character's Unicode
name (``]`` -> ``right_square_bracket``, with Textual's public ``KEY_NAME_REPLACEMENTS``),
whose inverse is the public ``textual.keys.key_to_character``. The pty tests
(``test_tui_pty.py``) press the real bytes
of the keys used here and see the action happen.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import unicodedata
from collections.abc import Iterator

from textual.binding import Binding
from textual.dom import DOMNode
from textual.keys import KEY_NAME_REPLACEMENTS, REPLACED_KEYS, Keys, key_to_character

import eagle_tui.tui

PRINTABLE = [chr(code) for code in range(0x20, 0x7F)]
"""The characters a US keyboard types (each arrives as one key event)."""


def character_key(character: str) -> str:
    """The key name Textual gives a typed ``character`` (letters and digits are themselves;
    other characters their Unicode name, lower case with underscores, with Textual's
    replacements: ``/`` is ``slash``)."""
    if character.isalnum():
        return character
    name = unicodedata.name(character).lower().replace("-", "_").replace(" ", "_")
    return KEY_NAME_REPLACEMENTS.get(name, name)


RECEIVABLE = frozenset(key.value for key in Keys) | {character_key(c) for c in PRINTABLE}


def dashboard_classes() -> Iterator[type[DOMNode]]:
    """Every app, screen and widget class the dashboard defines."""
    for module_info in pkgutil.walk_packages(eagle_tui.tui.__path__, "eagle_tui.tui."):
        if module_info.name.endswith("__main__"):
            continue  # runs the CLI when imported
        module = importlib.import_module(module_info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, DOMNode) and cls.__module__ == module.__name__:
                yield cls


def bound_keys() -> Iterator[tuple[str, str]]:
    """(where, key) for every key of every binding the dashboard declares."""
    for cls in dashboard_classes():
        for binding in Binding.make_bindings(cls.__dict__.get("BINDINGS", [])):
            yield f"{cls.__module__}.{cls.__name__} ({binding.action})", binding.key


def test_the_printable_names_are_textuals_own() -> None:
    # The derivation above agrees with Textual's public inverse for every printable key
    # (which takes the Unicode-derived name: "solidus", not its replacement "slash").
    for character in PRINTABLE[1:]:  # space is "space"
        name = character_key(character)
        assert key_to_character(REPLACED_KEYS.get(name, name)) == character, character
    assert {"right_square_bracket", "left_square_bracket", "question_mark", "slash",
            "space", "G"} <= RECEIVABLE
    assert not {"bracketright", "bracketleft", "questionmark", "ctrl+?"} & RECEIVABLE


def test_every_bound_key_is_one_textual_can_receive() -> None:
    bindings = list(bound_keys())
    assert len(bindings) > 50  # the app, four views, the modals, tables and the log pane
    dead = [f"{where}: {key!r}" for where, key in bindings if key not in RECEIVABLE]
    assert not dead, "bound to names Textual never produces:\n" + "\n".join(dead)

"""A text field that applies a burst of keys in the order they came.

Textual 8.2's ``Input`` types a printable key in its own key handler, but runs an editing
key (backspace, home, ctrl+u, …) as a binding, and non-priority bindings are looked up only
once the key event has bubbled from the field up to the app, through each ancestor's message
queue. When keys arrive in one read (a laggy SSH link, a fast typist, a terminal replaying a
macro) the app hands every key of the burst to the field before the first one has bubbled,
so ``BSpace×4 5 1 2`` over ``4096`` types ``512`` first and then deletes it: ``409``.
(``docs/upstream-textual-input-burst.md`` is the report; its minimal repro is
``tests/fixtures/upstream/textual_input_burst.py``.)

``Field`` runs the binding of a non-printable key where the key is, in the field's own queue,
so every key is applied in arrival order. The binding is looked up from the field itself up
to the app, the chain the app would walk, and not from the focused widget: a Tab later in
the burst may already have moved the focus on. Only public API: the classes' ``BINDINGS``,
``Binding.make_bindings`` and ``App.run_action`` (which asks ``check_action`` first).
"""

from __future__ import annotations

from functools import cache

from textual import events
from textual.binding import Binding
from textual.widgets import Input


@cache
def bindings_for(node_class: type, key: str) -> tuple[Binding, ...]:
    """The non-priority bindings of ``key`` that ``node_class`` declares or inherits, its
    own first (a subclass's binding wins)."""
    found: list[Binding] = []
    for cls in node_class.__mro__:
        declared = cls.__dict__.get("BINDINGS", ())
        found += [b for b in Binding.make_bindings(declared) if b.key == key and not b.priority]
    return tuple(found)


class Field(Input):
    """An ``Input`` whose editing keys keep their place among the typed ones; entered
    with Tab, its cursor is at the end (what is typed next appends, ctrl+u clears)."""

    LEAVES_ON_ENTER = False
    """Enter hands the keys back to the view (a view screen moves the focus at once: a key
    typed after Enter in the same burst is the view's, not a letter in the field)."""

    def on_focus(self) -> None:
        if not self.select_on_focus:
            self.cursor_position = len(self.value)

    async def on_key(self, event: events.Key) -> None:
        if event.is_printable:
            return  # Input types it, in order
        for node in self.ancestors_with_self:
            for binding in bindings_for(type(node), event.key):
                if await self.app.run_action(binding.action, node):
                    event.stop()
                    event.prevent_default()
                    return

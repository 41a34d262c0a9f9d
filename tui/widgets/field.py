"""A text field that applies a burst of keys in the order they came.

Textual 8.2's ``Input`` types a printable key in its own key handler, but runs an editing
key (backspace, home, ctrl+u, …) as a binding, and non-priority bindings are looked up only
once the key event has bubbled from the field up to the app, through each ancestor's message
queue. When keys arrive in one read (a laggy SSH link, a fast typist, a terminal replaying a
macro) the app hands every key of the burst to the field before the first one has bubbled,
so ``BSpace×4 5 1 2`` over ``4096`` types ``512`` first and then deletes it: ``409``.
(``docs/upstream/textual-input-burst.md`` is the report and its minimal repro.)

``Field`` runs the binding of a non-printable key where the key is, in the field's own queue,
so every key is applied in arrival order. Only public API: ``Screen.active_bindings`` says
which binding the key resolves to (the same chain the app would walk) and ``App.run_action``
runs it in that binding's namespace.
"""

from __future__ import annotations

from textual import events
from textual.widgets import Input


class Field(Input):
    """An ``Input`` whose editing keys keep their place among the typed ones."""

    async def on_key(self, event: events.Key) -> None:
        if event.is_printable:
            return  # Input types it, in order
        active = self.screen.active_bindings.get(event.key)
        if active is None or not active.enabled or active.binding.priority:
            return  # not bound here, off now, or already tried by the app before us
        event.stop()
        event.prevent_default()
        await self.app.run_action(active.binding.action, active.node)

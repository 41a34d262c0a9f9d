"""Keys as a terminal delivers a fast typist or a paste: one read, many keys.

``pilot.press`` waits for the app to go idle after every key (~0.1 s each on 2 cores); a
terminal does not wait, and the dashboard must keep a burst's order and field anyway (issue
20). Tests that type words use :func:`burst`, then wait for the outcome.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual import events
from textual.app import App


def burst(app: App[Any], keys: Iterable[str]) -> None:
    """Post ``keys`` (Textual key names; one character types itself) before the app runs."""
    for key in keys:
        app.post_message(events.Key(key, key if len(key) == 1 else None))

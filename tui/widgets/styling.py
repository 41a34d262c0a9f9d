"""Resolving component-class styles (from .tcss, so from the theme) for ``Content`` spans."""

from __future__ import annotations

from textual.style import Style
from textual.widget import Widget


def component_style(widget: Widget, name: str) -> Style:
    """The full style of ``widget``'s component class ``name`` over its own background.

    ``partial=False`` on purpose: partial styles lose a component's background and leave
    alpha colours such as ``$text-muted`` unresolved (seen on Textual 8.2.8).
    """
    return widget.get_visual_style(name, partial=False)

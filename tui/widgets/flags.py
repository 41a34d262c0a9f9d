"""Flags as badges: server flags with their evidence, sample flags as a compact row.

Severity decides the style (``flag--error``, ``flag--warning``, ``flag--info``); every
badge also starts with ``⚑`` and names the flag, so it reads without colour.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from textual.content import Content
from textual.reactive import reactive
from textual.style import Style
from textual.widget import Widget

from eagle_tui.tui.render import literal
from eagle_tui.tui.render.flags import BADGE, flag_severity
from eagle_tui.tui.widgets.styling import component_style


class FlagStyled(Widget):
    """Resolves the ``flag--*`` styles once per style update."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"flag--error", "flag--warning", "flag--info"}

    def flag_style(self, name: str) -> Style:
        """The style of a badge for flag ``name``."""
        return component_style(self, f"flag--{flag_severity(name)}")


class FlagBadges(FlagStyled):
    """Flag names in one wrapping line: ``⚑ truncated ⚑ tool_call`` (or ``clean``)."""

    names: reactive[tuple[str, ...]] = reactive((), layout=True)

    def render(self) -> Content:
        if not self.names:
            return Content("clean")
        parts: list[str | tuple[str, Style]] = []
        for name in self.names:
            parts.extend(((f"{BADGE} {name}", self.flag_style(name)), " "))
        return literal.assemble(*parts)


class FlagEvidence(FlagStyled):
    """One line per flag: the badge, then its evidence (server text, shown literally)."""

    flags: reactive[tuple[tuple[str, str], ...]] = reactive((), layout=True)

    def set_flags(self, flags: Iterable[tuple[str, str]]) -> None:
        """Show ``(name, evidence)`` pairs."""
        self.flags = tuple(flags)

    def render(self) -> Content:
        if not self.flags:
            return Content("no flags")
        return Content("\n").join(self._line(name, evidence) for name, evidence in self.flags)

    def _line(self, name: str, evidence: str) -> Content:
        return literal.assemble((f"{BADGE} {name}", self.flag_style(name)), " ", evidence)

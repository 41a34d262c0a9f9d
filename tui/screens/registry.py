"""Which screen class shows which view (imported lazily by the app)."""

from __future__ import annotations

from textual.screen import Screen


def view_screen_factory(view: str) -> Screen[None]:
    """A new screen for ``view``; each module is imported only when its view is first shown."""
    if view == "server":
        from eagle_tui.tui.screens.server import ServerScreen

        return ServerScreen()
    if view == "capture":
        from eagle_tui.tui.screens.capture import CaptureScreen

        return CaptureScreen()
    if view == "streams":
        from eagle_tui.tui.screens.streams import StreamsScreen

        return StreamsScreen()
    if view == "inspect":
        from eagle_tui.tui.screens.inspect import InspectScreen

        return InspectScreen()
    if view == "fleet":
        from eagle_tui.tui.screens.fleet import FleetScreen

        return FleetScreen()
    raise ValueError(f"unknown view {view!r}")

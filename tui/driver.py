"""Textual's terminal driver, writing through ``tui.termdiff``: only the cells that changed.

Every byte Textual sends to the terminal goes through its driver's public ``write``; the
dashboard passes a subclass of Textual's Linux driver as ``App(driver_class=…)`` whose
``write`` hands the bytes to a ``TerminalDiff`` and sends what comes back. Another driver
(Windows, or one named by ``TEXTUAL_DRIVER``) is left as it is: Textual's own output.
"""

from __future__ import annotations

import sys

from textual.driver import Driver

from eagle_tui.tui.termdiff import TerminalDiff


def diffing_driver(base: type[Driver], diff: TerminalDiff) -> type[Driver] | None:
    """``base`` writing through ``diff`` when it is Textual's Linux driver; None otherwise
    (Textual then picks its own driver, unchanged)."""
    if sys.platform == "win32":
        return None
    from textual.drivers.linux_driver import LinuxDriver

    if base is not LinuxDriver:
        return None

    class CellDiffDriver(LinuxDriver):
        """Textual's Linux driver, sending only the cells that changed."""

        def write(self, data: str) -> None:
            out = diff.feed(data)
            if out:
                super().write(out)

    return CellDiffDriver

"""Copying to the user's clipboard over SSH, and saying honestly whether it can work.

The dashboard copies with OSC 52 (``App.copy_to_clipboard``): the terminal is asked to put
the text on the clipboard and never answers. Some terminals cannot take it: the Linux
console, GNU screen, and tmux unless ``set-clipboard`` is ``on`` (its default,
``external``, drops what applications send). ``clipboard_reach`` tells which case this is,
so feedback never says "copied" when the copy was dropped.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Reach = Literal["yes", "no", "unknown"]


@dataclass(frozen=True)
class ClipboardReach:
    """Whether a copy reaches the clipboard, and why not (or why it cannot be known)."""

    reach: Reach
    why: str = ""


def clipboard_reach(env: Mapping[str, str] | None = None) -> ClipboardReach:
    """What is known about OSC 52 copies in this terminal."""
    env = os.environ if env is None else env
    if env.get("TERM", "") == "linux":
        return ClipboardReach("no", "the Linux console has no clipboard")
    if env.get("STY"):
        return ClipboardReach("no", "GNU screen does not pass clipboard requests on")
    if env.get("TMUX"):
        setting = _tmux_set_clipboard()
        if setting == "on":
            return ClipboardReach("yes")
        return ClipboardReach(
            "no", f"tmux drops it (set-clipboard is {setting or 'unknown'}; "
            "`set -g set-clipboard on` in tmux.conf lets it through)"
        )
    return ClipboardReach("unknown", "the terminal does not confirm copies (OSC 52)")


def _tmux_set_clipboard() -> str:
    try:
        done = subprocess.run(["tmux", "show-options", "-gv", "set-clipboard"],
                              capture_output=True, text=True, timeout=1.0, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip()


def copy_feedback(what: str, reach: ClipboardReach) -> tuple[str, str]:
    """(title, message) for a toast after copying ``what``."""
    if reach.reach == "yes":
        return f"Copied {what}", ""
    if reach.reach == "unknown":
        return f"Sent {what} to the clipboard", f"{reach.why}; if nothing arrives, it did not"
    return f"Not copied: {what}", reach.why

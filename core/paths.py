"""Where eagle-tui keeps per-user state (history, logs, registries) and configuration.

State: ``$EAGLE_TUI_STATE_DIR``, else ``$XDG_STATE_HOME/eagle-tui``, else
``~/.local/state/eagle-tui``. Config: ``$EAGLE_TUI_CONFIG_DIR``, else
``$XDG_CONFIG_HOME/eagle-tui``, else ``~/.config/eagle-tui``. Nothing is created here;
callers create what they write into.
"""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "eagle-tui"


def _resolve(own_var: str, xdg_var: str, fallback: str) -> Path:
    own = os.environ.get(own_var)
    if own:
        return Path(own).expanduser()
    xdg = os.environ.get(xdg_var)
    # The XDG spec says a relative value is invalid and must be ignored.
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / APP_NAME
    return Path.home() / fallback / APP_NAME


def state_dir() -> Path:
    """The user's eagle-tui state directory (may not exist yet)."""
    return _resolve("EAGLE_TUI_STATE_DIR", "XDG_STATE_HOME", ".local/state")


def config_dir() -> Path:
    """The user's eagle-tui config directory (may not exist yet)."""
    return _resolve("EAGLE_TUI_CONFIG_DIR", "XDG_CONFIG_HOME", ".config")

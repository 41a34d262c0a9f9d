"""Flag severity and badge text (pure): which flags are errors, warnings or information.

Severity decides a badge's style (``flag--error``, ``flag--warning``, ``flag--info``, in
``tui.widgets.flags``); every badge also starts with ``⚑`` and names the flag, so it reads
without colour.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

Severity = Literal["error", "warning", "info"]

ERROR_FLAGS = frozenset(
    {
        "crashed",
        "stalled",
        "port_conflict",
        "rank_exited",
        "bad_token_id",
        "count_mismatch",
        "prompt_count_mismatch",
        "no_stop_token",
        "over_max_new_tokens",
        "aborted",
        "no_think_end",
        "tool_call_before_think_end",
        "think_start_in_output",
    }
)
INFO_FLAGS = frozenset({"tool_call"})
BADGE = "⚑"


def flag_severity(name: str) -> Severity:
    """``error`` for fatal and data-breaking flags, ``info`` for informational ones,
    ``warning`` otherwise."""
    if name.startswith("fatal") or name in ERROR_FLAGS:
        return "error"
    if name in INFO_FLAGS:
        return "info"
    return "warning"



def badge_text(names: Sequence[str]) -> str:
    """Plain ``⚑ a ⚑ b`` (for table cells)."""
    return " ".join(f"{BADGE} {name}" for name in names)

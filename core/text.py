"""Text for people, one way everywhere: durations, clipped one-liners, quoted evidence, counts.

Every view and verb formats through here, so 90 seconds reads ``1m30s`` in the watch output,
the dashboard, the capture summary and the batch table alike.
"""

from __future__ import annotations

from collections.abc import Mapping


def duration(seconds: float | None, unknown: str = "?") -> str:
    """``42s``, ``5m12s``, ``1h03m``; ``unknown`` for None. Rounds to the nearest second."""
    if seconds is None:
        return unknown
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def clip(text: str, limit: int = 160) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def quote(text: str | None, limit: int = 160) -> str:
    """A log line quoted for evidence; ``(none)`` when absent."""
    return "(none)" if text is None else repr(clip(text, limit))


def counts_text(kinds: Mapping[str, int]) -> str:
    """``busy 3, timeout 1`` (largest first), or ``none``."""
    if not kinds:
        return "none"
    return ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))

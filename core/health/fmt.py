"""Small text helpers shared by evidence, diagnoses and the ``watch`` output."""

from __future__ import annotations


def duration(seconds: float | None) -> str:
    """``42 s``, ``5m12s``, ``1h03m``; ``?`` for None."""
    if seconds is None:
        return "?"
    s = max(0, round(seconds))
    if s < 120:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def clip(text: str, limit: int = 160) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def quote(text: str | None, limit: int = 160) -> str:
    """A log line quoted for evidence; ``(none)`` when absent."""
    return "(none)" if text is None else repr(clip(text, limit))

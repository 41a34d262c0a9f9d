"""A live acceptance figure, always with where it came from and what it covers.

SGLang reports acceptance in four places with four meanings (docs/acceptance.md); a bare
"2.7" cannot say which. Every live figure here carries its ``source`` and ``window``:

- ``metrics``: Δ``sglang:generation_tokens_total`` / Δ``sglang:spec_verify_calls_total``
  between two ``/metrics`` scrapes (requests that finished in the window);
- ``decode_log``: the ``accept len:`` of the decode log lines in the window;
- ``lifetime``: ``/server_info``'s ``avg_spec_accept_length`` (since start or the last
  ``/flush_cache`` of an idle server).
"""

from __future__ import annotations

from typing import Literal

import msgspec

Source = Literal["metrics", "decode_log", "lifetime"]

SOURCE_PREFERENCE: tuple[Source, ...] = ("metrics", "decode_log", "lifetime")
"""Best first: the counters weight every token, the log only samples intervals, the lifetime
figure mixes every workload since start."""


class AcceptFigure(msgspec.Struct, frozen=True):
    """An accept length (tokens per verify step) with its source and window.

    ``window`` is said for people ("last 60 s", "lifetime"); ``window_s`` is its length
    when it has one; ``accept_rate`` (accepted / proposed drafts) when the source gives it;
    ``basis`` the counts behind the figure ("Δ1,234 tokens / Δ456 verify steps")."""

    accept_length: float
    source: Source
    window: str
    window_s: float | None = None
    accept_rate: float | None = None
    basis: str = ""

    @property
    def label(self) -> str:
        """``2.71 (metrics, last 60 s)``."""
        return f"{self.accept_length:.2f} ({self.source.replace('_', ' ')}, {self.window})"


def best_figure(*figures: AcceptFigure | None) -> AcceptFigure | None:
    """The figure from the best source available: metrics, else the decode log, else the
    lifetime average."""
    present = [f for f in figures if f is not None]
    for source in SOURCE_PREFERENCE:
        for figure in present:
            if figure.source == source:
                return figure
    return None


def window_text(seconds: float) -> str:
    """``last 60 s``."""
    return f"last {seconds:g} s"


__all__ = ["SOURCE_PREFERENCE", "AcceptFigure", "Source", "best_figure", "window_text"]

"""A server's live acceptance as the Server view shows it (pure; no Textual).

``AcceptanceReading`` is what a server feed emits after a look at a speculating server: the
live figure (with its source and window, docs/acceptance.md) and the figures before it, for
the card's sparkline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from eagle_tui.core.accept.alarms import Alarm
from eagle_tui.core.accept.config import SpecConfig
from eagle_tui.core.accept.figures import AcceptFigure
from eagle_tui.core.accept.requests import stored_acceptance

if TYPE_CHECKING:
    from eagle_tui.core.accept.live import LiveAcceptance
    from eagle_tui.core.accept.requests import RequestAcceptance


class AcceptanceDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A server's live acceptance as ``status --json`` shows it (its ``acceptance`` entry):
    the speculative config, the figure with its source and window, its label, the alarm,
    and why a figure the server gave was not believed (``invalid``: 1e308 tokens per step)."""

    config: SpecConfig
    figure: AcceptFigure | None
    label: str | None
    alarm: Alarm | None
    invalid: str | None = None

    @classmethod
    def of(cls, live: LiveAcceptance) -> AcceptanceDoc:
        """The document of a live acceptance."""
        return cls(config=live.config, figure=live.figure, alarm=live.alarm,
                   label=None if live.figure is None else live.figure.label,
                   invalid=live.invalid)


def acceptance_lines(doc: AcceptanceDoc | None, lead: str = "") -> list[str]:
    """``  accept 2.71 (metrics, since start) with NGRAM`` and its alarm, for a server that
    speculates (nothing otherwise)."""
    if doc is None or doc.config.algorithm is None:
        return []
    lines = [f"  {lead}accept {doc.label or 'no figure yet'} with {doc.config.algorithm}"]
    if doc.invalid is not None:
        lines.append(f"  {doc.invalid}")
    if doc.alarm is not None:
        lines.append(f"  ALARM {doc.alarm.message}; next: {doc.alarm.next_step}")
    return lines


@dataclass(frozen=True)
class AcceptanceReading:
    """One look at a server's acceptance and the history of figures (oldest first)."""

    live: LiveAcceptance
    history: tuple[float, ...] = ()


def acceptance_text(reading: AcceptanceReading) -> str:
    """``accept 2.71 (metrics, last 60 s) · rate 0.57 · EAGLE3, 4 draft tokens, …``."""
    live = reading.live
    figure = live.figure
    head = "accept: no figure yet" if figure is None else f"accept {figure.label}"
    parts = [head]
    if live.invalid is not None:
        parts.append(live.invalid)
    if figure is not None and figure.accept_rate is not None:
        parts.append(f"rate {figure.accept_rate:.2f}")
    parts.append(live.config.summary)
    return " · ".join(parts)


def alarm_text(reading: AcceptanceReading) -> str:
    """The 1.00 alarm and its next step, or nothing."""
    alarm = reading.live.alarm
    return "" if alarm is None else f"{alarm.message}; next: {alarm.next_step}"


def request_acceptance_text(acceptance: RequestAcceptance) -> str:
    """One request's acceptance: ``accept 3.20 · rate 0.73 · 12 verify steps · P(>=j) 0.92
    0.75 0.40`` (``spec_accept_length``, ``spec_accept_rate``, ``spec_verify_ct`` and the
    per-position figures from ``spec_correct_drafts_histogram``)."""
    if acceptance.accept_length is None:
        return "no verify step"
    parts = [f"accept {acceptance.accept_length:.2f}"]
    if acceptance.accept_rate is not None:
        parts.append(f"rate {acceptance.accept_rate:.2f}")
    steps = acceptance.verify_steps
    parts.append(f"{steps} verify step{'s' if steps != 1 else ''}")
    if acceptance.per_position:
        parts.append("P(>=j) " + " ".join(f"{p:.2f}" for p in acceptance.per_position))
    return " · ".join(parts)


def stored_acceptance_text(counts: Mapping[str, Any] | None) -> str:
    """A stored row's acceptance as the Streams box showed it live (``eagle-tui inspect``
    and the Inspect view both print this); "" when the row stored none (the server did not
    speculate, or the shard predates the column), or what does not fit when malformed."""
    try:
        acceptance = stored_acceptance(counts)
    except ValueError as e:
        return str(e)
    return "" if acceptance is None else request_acceptance_text(acceptance)

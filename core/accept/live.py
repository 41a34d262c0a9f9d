"""A server's live acceptance: its config, the best figure available, and the 1.00 alarm.

The caller keeps a :class:`~eagle_tui.core.accept.window.MetricsWindow` fed with ``/metrics``
scrapes and/or a :class:`~eagle_tui.core.accept.decodelog.DecodeLogWindow` fed with decode
log lines, and passes the latest ``/server_info``; :func:`live_acceptance` picks the metrics
figure, else the log's, else the lifetime average, each labelled with its source and window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import msgspec

from eagle_tui.core.accept.alarms import Alarm, stuck_at_one
from eagle_tui.core.accept.config import SpecConfig, lifetime_figure, spec_config
from eagle_tui.core.accept.decodelog import DecodeLogWindow
from eagle_tui.core.accept.figures import AcceptFigure, best_figure
from eagle_tui.core.accept.requests import MAX_COUNT, MAX_DRAFT_TOKENS
from eagle_tui.core.accept.window import MetricsWindow


class LiveAcceptance(msgspec.Struct, frozen=True):
    """What the Server view and ``status --json`` show for one server: ``figure`` is None
    when speculation is off or nothing has been measured yet; ``invalid`` says why a figure
    the server gave was not believed (:func:`figure_problem`), the best one left out."""

    config: SpecConfig
    figure: AcceptFigure | None = None
    alarm: Alarm | None = None
    invalid: str | None = None


def live_acceptance(
    server_info: Mapping[str, Any],
    *,
    metrics: MetricsWindow | None = None,
    log: DecodeLogWindow | None = None,
) -> LiveAcceptance:
    """The live acceptance of a server from its ``/server_info`` and the windows kept."""
    config = spec_config(server_info)
    return live_from_figures(
        server_info,
        metrics.figure(draft_tokens=config.num_draft_tokens) if metrics is not None else None,
        log.figure() if log is not None else None,
        lifetime_figure(server_info),
    )


def live_from_figures(server_info: Mapping[str, Any],
                      *figures: AcceptFigure | None) -> LiveAcceptance:
    """The live acceptance from figures already computed: the best source wins."""
    config = spec_config(server_info)
    if not config.enabled:
        return LiveAcceptance(config)
    problems = [(f, figure_problem(f, config)) for f in figures if f is not None]
    believed = [f for f, problem in problems if problem is None]
    invalid = next((problem for _, problem in problems if problem is not None), None)
    figure = best_figure(*believed)
    return LiveAcceptance(config, figure, stuck_at_one(figure, config), invalid)


def figure_problem(figure: AcceptFigure, config: SpecConfig) -> str | None:
    """Why ``figure`` cannot be a real accept length, else None: a verify step emits at
    least one token and at most the server's draft tokens (the log and lifetime figures;
    the metrics one adds each answer's prefill token, so only its accept rate is bounded),
    and an accept rate is a share."""
    value, rate = figure.accept_length, figure.accept_rate
    where = f"{figure.source.replace('_', ' ')}, {figure.window}"
    limit = config.num_draft_tokens or MAX_DRAFT_TOKENS
    if figure.source == "metrics":
        limit = MAX_COUNT
    if not math.isfinite(value) or not 1.0 - EPSILON <= value <= limit + EPSILON:
        return (f"invalid: {value:.3g} tokens per verify step ({where}) is impossible (a "
                f"verify step emits 1 to {limit} tokens)")
    if rate is not None and not (math.isfinite(rate) and 0.0 <= rate <= 1.0 + EPSILON):
        return f"invalid: accept rate {rate:.3g} ({where}) is not a share of 0 to 1"
    return None


EPSILON = 1e-6


__all__ = ["LiveAcceptance", "figure_problem", "live_acceptance", "live_from_figures"]

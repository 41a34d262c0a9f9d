"""A server's live acceptance: its config, the best figure available, and the 1.00 alarm.

The caller keeps a :class:`~eagle_tui.core.accept.window.MetricsWindow` fed with ``/metrics``
scrapes and/or a :class:`~eagle_tui.core.accept.decodelog.DecodeLogWindow` fed with decode
log lines, and passes the latest ``/server_info``; :func:`live_acceptance` picks the metrics
figure, else the log's, else the lifetime average, each labelled with its source and window.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from eagle_tui.core.accept.alarms import Alarm, stuck_at_one
from eagle_tui.core.accept.config import SpecConfig, lifetime_figure, spec_config
from eagle_tui.core.accept.decodelog import DecodeLogWindow
from eagle_tui.core.accept.figures import AcceptFigure, best_figure
from eagle_tui.core.accept.window import MetricsWindow


class LiveAcceptance(msgspec.Struct, frozen=True):
    """What the Server view and ``status --json`` show for one server: ``figure`` is None
    when speculation is off or nothing has been measured yet."""

    config: SpecConfig
    figure: AcceptFigure | None = None
    alarm: Alarm | None = None


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
    figure = best_figure(*figures)
    return LiveAcceptance(config, figure, stuck_at_one(figure, config))


__all__ = ["LiveAcceptance", "live_acceptance", "live_from_figures"]

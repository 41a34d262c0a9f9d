"""A server's live acceptance, read from the server itself (``/server_info``, ``/metrics``,
its decode log), for ``status`` and the Server view.

``read_acceptance(url)`` takes one look: the speculative config from ``/server_info``; the
metrics figure since the process started (SGLang's counters start at zero with it, so one
scrape is already a window: ``since start``); else the decode log's lines (``log_lines``,
the last ``window_s`` seconds of them); else the lifetime ``avg_spec_accept_length``. Each
figure carries its source and window (``core.accept.figures``).

``AcceptanceTracker`` keeps a sliding ``MetricsWindow`` over repeated scrapes (the Server
view's ``last 60 s``) and the history of figures behind its sparkline. It asks
``/server_info`` only when what it carries can have changed: at the first look, after the
server stopped answering (a restart) and when told (``forget_info``: a new process, a
person asking); every other look is one ``/metrics`` scrape (none for a server without
metrics), so an idle server's log is not filled with our requests. ``load`` is the scrape's
gauges with the time they were true (``core.health.load``). Nothing here raises: a server
that does not answer gives None.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from eagle_tui.core.accept.config import lifetime_figure, spec_config
from eagle_tui.core.accept.decodelog import DecodeLogWindow, points_from_log
from eagle_tui.core.accept.figures import AcceptFigure
from eagle_tui.core.accept.live import LiveAcceptance, live_from_figures
from eagle_tui.core.accept.window import CounterSample, MetricsWindow, counter_sample
from eagle_tui.core.clock import Clock
from eagle_tui.core.health.load import metrics_load
from eagle_tui.core.health.snapshot import ServingLoad
from eagle_tui.core.sglang import ClientTimeouts, SGLangClient
from eagle_tui.core.urls import ServerURL

log = logging.getLogger(__name__)

DEFAULT_WINDOW_S = 60.0
HISTORY = 120  # figures behind a sparkline
TIMEOUTS = ClientTimeouts(connect=2.0, health=5.0, info=5.0)


async def fetch(client: SGLangClient) -> tuple[Mapping[str, Any], dict[str, float] | None] | None:
    """``/server_info`` (raw) and ``/metrics`` (None without ``--enable-metrics``); None when
    the server does not answer ``/server_info``."""
    try:
        info = (await client.server_info()).raw
    except Exception as error:  # unreachable, starting, not SGLang: no figure, no noise
        log.debug("no /server_info from %s: %s", client.base_url, error)
        return None
    try:
        metrics = await client.metrics()
    except Exception as error:
        log.debug("no /metrics from %s: %s", client.base_url, error)
        metrics = None
    return info, metrics


def since_start(metrics: Mapping[str, float] | None, draft_tokens: int | None) -> (
        AcceptFigure | None):
    """The counters' figure since the process started (they start at zero)."""
    sample = counter_sample(metrics, 1.0) if metrics is not None else None
    if sample is None:
        return None
    start = CounterSample(0.0, 0.0, 0.0, 0.0 if sample.requests is not None else None)
    figure = MetricsWindow(2.0)
    figure.add(start)
    figure.add(sample)
    found = figure.figure(draft_tokens=draft_tokens)
    return None if found is None else msgspec.structs.replace(found, window="since start",
                                                              window_s=None)


def log_figure_of(lines: Sequence[str], window_s: float) -> AcceptFigure | None:
    """The decode log's figure over the last ``window_s`` seconds of ``lines``."""
    window = DecodeLogWindow(window_s)
    for point in points_from_log(lines):
        window.add(point)
    return window.figure()


async def read_acceptance(url: ServerURL, *, api_key: str | None = None,
                          log_lines: Sequence[str] = (),
                          window_s: float = DEFAULT_WINDOW_S) -> LiveAcceptance | None:
    """One look at a server (see the module docstring); None when it does not answer."""
    async with SGLangClient(url, api_key=api_key, timeouts=TIMEOUTS) as client:
        found = await fetch(client)
    if found is None:
        return None
    info, metrics = found
    config = spec_config(info)
    return live_from_figures(
        info,
        since_start(metrics, config.num_draft_tokens),
        log_figure_of(log_lines, window_s) if log_lines else None,
        lifetime_figure(info))


class AcceptanceTracker:
    """Repeated looks at one server: ``sample()`` scrapes and returns the live acceptance
    over the last ``window_s`` seconds; ``history`` holds the figures for a sparkline."""

    def __init__(self, client: SGLangClient, clock: Clock, *,
                 window_s: float = DEFAULT_WINDOW_S) -> None:
        self._client = client
        self._clock = clock
        self.metrics = MetricsWindow(window_s)
        self.log = DecodeLogWindow(window_s)
        self.history: deque[float] = deque(maxlen=HISTORY)
        self.latest: LiveAcceptance | None = None
        self.info: Mapping[str, Any] | None = None  # the last /server_info, kept
        self.has_metrics: bool | None = None  # None: not asked since the last /server_info
        self.load: ServingLoad | None = None  # the last scrape's gauges
        self.info_looks = 0  # /server_info requests made (our footprint)

    def forget_info(self) -> None:
        """Ask ``/server_info`` again at the next look (a restart, a person asking)."""
        self.info, self.has_metrics = None, None

    def add_log_lines(self, lines: Sequence[str]) -> None:
        """Decode lines the log follower read (timed by their own stamps)."""
        for point in points_from_log(lines):
            self.log.add(point)

    async def aclose(self) -> None:
        """Close the client."""
        await self._client.aclose()

    async def sample(self) -> LiveAcceptance | None:
        """Scrape once and return the figure from the best source (None: no answer)."""
        found = await self._look()
        if found is None:
            return None
        info, metrics = found
        config = spec_config(info)
        if metrics is not None:
            self.load = metrics_load(metrics, self._clock.wall())
        sample = counter_sample(metrics, self._clock.monotonic()) if metrics else None
        if sample is not None:
            self.metrics.add(sample)
        live = live_from_figures(info, self.metrics.figure(draft_tokens=config.num_draft_tokens),
                                 self.log.figure(), lifetime_figure(info))
        if live.figure is not None:
            self.history.append(live.figure.accept_length)
        self.latest = live
        return live

    async def _look(self) -> tuple[Mapping[str, Any], dict[str, float] | None] | None:
        """``/server_info`` when it is not kept, else only ``/metrics`` (when exported)."""
        if self.info is None:
            self.info_looks += 1
            found = await fetch(self._client)
            if found is not None:
                self.info, self.has_metrics = found[0], found[1] is not None
            return found
        if not self.has_metrics:
            return self.info, None
        try:
            metrics = await self._client.metrics()
        except Exception as error:  # gone or restarting: read /server_info again once back
            log.debug("no /metrics from %s: %s", self._client.base_url, error)
            self.forget_info()
            return None
        return self.info, metrics


__all__ = ["TIMEOUTS", "AcceptanceTracker", "fetch", "log_figure_of", "read_acceptance",
           "since_start"]

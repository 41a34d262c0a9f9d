"""A server's load, with the time it was true: figures expire instead of reading as current.

Two sources. The log's latest ``Prefill``/``Decode batch`` line (dated by its own stamp on
an attach, by its arrival after): SGLang writes one every ``--decode-log-interval`` decode
steps while it serves and none while idle, so a line older than a few of those intervals
(``WatchSettings.load_intervals`` times the median gap between recent decode lines, at least
``load_floor_s``) says nothing about now: the load reads "idle since" the line's time. And
the server's ``/metrics`` gauges (``sglang:num_running_reqs``, ``num_queue_reqs``,
``gen_throughput``, ``token_usage``), true when scraped: preferred while fresh.

A server that is not serving (down, crashed, starting, stopping) has no load: its figures
are kept for the record but never ``current``, so no total counts them.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import replace

from eagle_tui.core.health.logtrack import LogTracker
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import HealthSnapshot, ServingLoad

SERVING = frozenset({Phase.READY, Phase.DEGRADED})
_GAUGES = {
    "running": "sglang:num_running_reqs",
    "queued": "sglang:num_queue_reqs",
    "throughput": "sglang:gen_throughput",
    "token_usage": "sglang:token_usage",
}


def decode_interval(log: LogTracker, settings: WatchSettings) -> float:
    """The typical gap between two decode lines of this log (assumed before two were seen)."""
    if not log.decode_gaps:
        return settings.decode_interval_s
    return statistics.median(log.decode_gaps)


def expiry_s(log: LogTracker, settings: WatchSettings) -> float:
    """How long a batch line's figures stay current: a few decode-log intervals."""
    return max(settings.load_floor_s, settings.load_intervals * decode_interval(log, settings))


def log_load(log: LogTracker, phase: Phase, now: float, wall: float,
             settings: WatchSettings) -> ServingLoad | None:
    """The log's latest batch line as a load (``now`` monotonic, ``wall`` its wall time)."""
    batch, at = log.load, log.load_at
    if batch is None or at is None:
        return None
    age = max(0.0, now - at)
    true_at = wall - age
    serving = phase in SERVING
    current = serving and age <= expiry_s(log, settings)
    return ServingLoad(batch.kind, batch.running, batch.queued, batch.throughput,
                       batch.token_usage, age, at=true_at, source="log", current=current,
                       idle_since=true_at if serving and not current else None)


def metrics_load(metrics: Mapping[str, float], at: float) -> ServingLoad | None:
    """The ``/metrics`` gauges scraped at wall time ``at``; None when it exports none."""
    running = metrics.get(_GAUGES["running"])
    if running is None:
        return None
    return ServingLoad("metrics", round(running), _whole(metrics.get(_GAUGES["queued"])),
                       metrics.get(_GAUGES["throughput"]), metrics.get(_GAUGES["token_usage"]),
                       0.0, at=at, source="metrics")


def _whole(value: float | None) -> int | None:
    return None if value is None else round(value)


def with_live_load(snapshot: HealthSnapshot, live: ServingLoad | None,
                   fresh_s: float) -> HealthSnapshot:
    """``snapshot`` with the ``/metrics`` load in place of the log's while the scrape is
    younger than ``fresh_s`` and the server serves. Idle gauges (nothing running or queued)
    read idle since the log's last batch line, when there is one."""
    if live is None or live.at is None or snapshot.phase not in SERVING:
        return snapshot
    age = max(0.0, snapshot.at - live.at)
    if age > fresh_s:
        return snapshot
    busy = live.running > 0 or bool(live.queued)
    logged = snapshot.load
    since = None if busy or logged is None else (logged.at if logged.current else
                                                 logged.idle_since)
    load = replace(live, age_s=age, current=busy, idle_since=since)
    return replace(snapshot, load=load)

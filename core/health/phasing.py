"""Decide the phase from the log, the process and ``/health`` (see phase.py).

Order of evidence: a process that is gone outranks everything (crashed, or down after a
deliberate stop: SIGTERM, Ctrl-C, ranks ending with -15); then a fatal log line (or a bare
traceback that ended in an exception); then a shutdown line; then ``/health``; then how
far the log has got. With only a URL the phases collapse to unreachable / warming_up /
ready (and degraded, then crashed when a port that served starts refusing).
"""

from __future__ import annotations

from eagle_tui.core.health.context import TickContext
from eagle_tui.core.health.phase import Phase, later
from eagle_tui.core.health.poller import HealthOutcome


def decide_phase(c: TickContext) -> Phase:
    """The phase this tick's evidence points to."""
    log = c.log
    if c.process is not None and not c.process.alive:
        return Phase.DOWN if c.stopping and not _failed(c) else Phase.CRASHED
    if log is not None and log.crash.failed:
        return Phase.CRASHED
    if c.stopping and log is not None:
        return Phase.STOPPING
    if c.was_ready:
        return _after_ready(c)
    if _health_ok(c) or (log is not None and log.phase == Phase.READY):
        return Phase.READY
    return _starting(c)


def _failed(c: TickContext) -> bool:
    """A failure the log reported before any stop was asked for."""
    return c.log is not None and c.log.crash.failed


def _health_ok(c: TickContext) -> bool:
    latest = c.health.latest
    return latest is not None and latest.outcome == HealthOutcome.OK and c.health_is_ours()


def _after_ready(c: TickContext) -> Phase:
    run = c.health
    if run.failures == 0:
        return Phase.READY
    if c.process is None and c.log is None and run.refusals >= c.settings.crashed_after_refusals:
        return Phase.CRASHED  # URL only: the port that served now refuses; the server is gone
    if run.failures >= c.settings.degraded_after_failures:
        return Phase.DEGRADED
    return Phase.READY


def _starting(c: TickContext) -> Phase:
    reached = c.log.phase if c.log is not None else None
    latest = c.health.latest
    if latest is not None and latest.answered and c.health_is_ours():
        reached = later(reached, Phase.WARMING_UP)
    if reached is not None:
        return reached
    if c.process is not None:
        return Phase.LAUNCHING
    if c.log is None and not c.has_process:
        return Phase.UNREACHABLE
    return Phase.DOWN

"""What a verdict quotes and waits for: the evidence of a stop, of readiness, and whether a
failure's evidence is complete (``verdict.judge`` takes them)."""

from __future__ import annotations

import time

from eagle_tui.core.health.context import TickContext
from eagle_tui.core.health.logtrack import LogTracker
from eagle_tui.core.health.poller import HealthOutcome
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.outside import quote
from eagle_tui.core.proc.report import ProcessReport
from eagle_tui.core.text import duration


def stop_evidence(log: LogTracker | None, process: ProcessReport | None,
                  stop_requested: bool) -> str | None:
    """Why this is a deliberate stop (a logged shutdown, ranks ended by a signal, an exit
    by SIGTERM/SIGINT, our own request), or None."""
    if log is not None and log.shutdown is not None:
        text = quote(log.shutdown.line.text)
        if log.drain_remaining is not None:
            text += f"; {log.drain_remaining} requests still draining"
        return text
    if log is not None and log.crash.stop_echoes:
        return f"ranks ended by a signal: {quote(log.crash.stop_echoes[0].line.text)}"
    if process is not None and process.exit_code in (-15, -2):
        return f"PID {process.pid} {process.describe_exit()}"
    if stop_requested:
        return "stop requested by eagle-tui"
    return None


def settled(log: LogTracker | None, process: ProcessReport | None, now: float,
            settings: WatchSettings) -> bool:
    """The failure's evidence is complete: the process is gone or the log went quiet."""
    if process is not None and not process.alive:
        return True
    if log is None:
        return True
    return log.crash.settled(log.last_line_at, now, settings.crash_settle_s)


def ready_text(ctx: TickContext, ready_after: float | None) -> str:
    """How we know it is ready, and how long it took against the expected window."""
    latest = ctx.health.latest
    if latest is not None and latest.outcome == HealthOutcome.OK:
        how = f"/health {latest.describe()}"
    else:
        how = "the log says 'fired up and ready to roll'"
    if ready_after is None:
        return f"{how}; {start_not_seen(ctx.process)}"
    window = ctx.expectations.expectation.window_s
    return f"{how}; {duration(ready_after)} since launch (expected within {duration(window)})"


def start_not_seen(process: ProcessReport | None) -> str:
    """What is said instead of a start-up time the watch did not see."""
    if process is not None and process.create_time:
        started = time.strftime("%H:%M:%S", time.localtime(process.create_time))
        return (f"already up when the watch began: start-up not seen, its time unknown "
                f"(PID {process.pid} started at {started})")
    return "already up when the watch began: start-up not seen, its time unknown"

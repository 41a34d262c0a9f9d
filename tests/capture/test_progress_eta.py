"""Issue 20 (Low): the ETA is a promise only while requests are being sent. No ETA while a
batch stops (``ETA 37s [stopping]`` after Ctrl-C) or is paused, and after a resume the rate
(so the ETA) leaves the pause out instead of averaging it in."""

from __future__ import annotations

from support.clock import FakeClock

from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.capture.progress import ProgressTracker
from eagle_tui.core.capture.report import progress_line
from eagle_tui.tui.cli.capture_display import panel


def running_tracker(clock: FakeClock, rows: int = 10) -> ProgressTracker:
    """A batch of 100 rows that finished ``rows`` of them at one a second."""
    tracker = ProgressTracker(clock)
    tracker.total = 100
    tracker.state = BatchState.RUNNING
    for _ in range(rows):
        clock.advance(1.0)
        tracker.row_done(10, ())
    return tracker


def test_no_eta_while_stopping_or_paused() -> None:
    clock = FakeClock()
    tracker = running_tracker(clock)
    eta = tracker.snapshot().counts.eta_s
    assert eta is not None and 80 <= eta <= 100
    for state in (BatchState.STOPPING, BatchState.PAUSED):
        tracker.state = state
        snapshot = tracker.snapshot()
        assert snapshot.counts.eta_s is None, state
        assert "ETA —" in progress_line(snapshot)


def test_the_foreground_panel_says_no_eta_after_ctrl_c() -> None:
    from rich.console import Console

    clock = FakeClock()
    tracker = running_tracker(clock)
    tracker.state = BatchState.STOPPING  # what Ctrl-C does to a foreground capture
    console = Console(record=True, width=120, color_system=None)
    console.print(panel(tracker.snapshot()))
    head = console.export_text().splitlines()[0]
    assert "[stopping]" in head and "ETA —" in head and "s  [" not in head


def test_the_eta_after_a_resume_leaves_the_pause_out() -> None:
    clock = FakeClock()
    tracker = running_tracker(clock)
    before = tracker.snapshot().counts
    tracker.state = BatchState.PAUSED
    clock.advance(600.0)  # ten minutes paused
    tracker.state = BatchState.RUNNING
    after = tracker.snapshot().counts
    assert after.samples_per_s == before.samples_per_s  # not 10 rows over 610 s
    assert after.eta_s == before.eta_s
    clock.advance(1.0)
    tracker.row_done(10, ())
    assert tracker.snapshot().counts.samples_per_s == before.samples_per_s
    assert tracker.snapshot().counts.elapsed_s == 611.0  # wall time still counts the pause

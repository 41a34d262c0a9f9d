"""One ``progress_fields`` for every renderer of a ``Progress``: capture's log line and live
panel, the dashboard's batch table, and the ``batches`` table and details show the same
counter the same way (the ``batches`` verb once said ``0.05`` samples/s and ``1235`` tok/s
where capture and the dashboard said ``0.1`` and ``1,235``)."""

from __future__ import annotations

import io
import time
from pathlib import Path

from rich.console import Console
from support.records import stored_config

from eagle_tui.core.batches.api import BatchInfo, StatusDoc
from eagle_tui.core.batches.registry import BatchRecord
from eagle_tui.core.batches.survey import BatchView
from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.capture.progress import CaptureProgress, Progress, progress_fields
from eagle_tui.core.capture.report import progress_line
from eagle_tui.tui.cli.batch_table import details, table_row
from eagle_tui.tui.cli.capture_display import panel
from eagle_tui.tui.render.batch import BatchSnapshot
from eagle_tui.tui.render.capture import table_cells

COUNTS = Progress(total=5000, done=1200, written=1100, failed=1234, flagged=2, rejected=0,
                  settled=2434, remaining=2566, samples_per_s=0.05, tokens_per_s=1234.6,
                  eta_s=192.0, in_flight=8)


def test_the_fields_of_a_progress() -> None:
    f = progress_fields(COUNTS)
    assert (f.rows, f.percent, f.samples_per_s, f.tokens_per_s, f.eta, f.failed) == (
        "2,434/5,000", "49%", "0.1", "1,235", "3m12s", "1,234")
    unknown = progress_fields(Progress(settled=7), unknown="-")
    assert (unknown.rows, unknown.percent, unknown.eta) == ("7/?", "-", "-")


def test_every_renderer_shows_the_counter_the_same_way(tmp_path: Path) -> None:
    snapshot = CaptureProgress(state=BatchState.RUNNING, counts=COUNTS)
    console = Console(record=True, width=120, file=io.StringIO())
    console.print(panel(snapshot))
    shown = {
        "capture log line": progress_line(snapshot),
        "capture panel": console.export_text(),
        "dashboard table": " ".join(table_cells(BatchSnapshot(
            "b", tmp_path, tmp_path / "p.jsonl", (), BatchState.RUNNING, progress=snapshot))),
        "batches table": " ".join(table_row(live_view(tmp_path))),
        "batches details": details(live_view(tmp_path)),
    }
    for where, text in shown.items():
        assert "0.1" in text and "1,235" in text, where
        assert "0.05" not in text and "1235" not in text, where
    for where in ("capture log line", "capture panel", "dashboard table"):
        assert "2,434/5,000" in shown[where] and "3m12s" in shown[where], where
    for where in ("capture log line", "capture panel", "dashboard table", "batches table"):
        assert "1,234" in shown[where], where


def live_view(out: Path) -> BatchView:
    """A batch whose worker answered with ``COUNTS``."""
    record = BatchRecord(id="b", name="night", out_dir=str(out), socket=str(out / "c.sock"),
                         log=str(out / "w.log"), config=stored_config(out),
                         created_at=time.time(), pid=4242, runs=1)
    status = StatusDoc(schema=1, at=time.time(), batch=BatchInfo(id="b", name="night",
                                                                    out_dir=str(out)),
                       state=BatchState.RUNNING, progress=COUNTS)
    return BatchView(record, BatchState.RUNNING, COUNTS, live_status=status)

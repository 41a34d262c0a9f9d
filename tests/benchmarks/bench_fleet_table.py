"""What does a redraw of the Fleet view's table cost the UI thread? (A script.)

Shows ``--rows`` servers in the Fleet table (headless, 120×40) and, in the same run, the same
cells in Textual's ``DataTable`` updated the way the Fleet table used to be (``update_cell``
per changed cell, ``update_width`` only when the text is wider). Each frame every row's tok/s
changes, as with a fleet at work; the figure is the UI thread's CPU per frame, the median of
``--rounds`` rounds of ``--frames`` frames, and the ratio of the two.

    python tests/benchmarks/bench_fleet_table.py [--rows 16,64] [--frames 20] [--rounds 3]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.cells import cell_len
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widget import Widget
from textual.widgets import DataTable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from eagle_tui.core.argtypes import Checked, OneLineParser, Whole  # noqa: E402
from eagle_tui.tui.render.fleet import COLUMNS, FleetRow, cells  # noqa: E402
from eagle_tui.tui.widgets.fleet_table import FleetTable  # noqa: E402

SIZE = (120, 40)


def fleet(count: int, frame: int) -> list[FleetRow]:
    """``count`` servers at work: each frame, every tok/s moves."""
    phases = (("ready", "ok"), ("launching", "busy"), ("down", "bad"))
    rows = []
    for i in range(count):
        phase, tone = phases[i % 3] if i % 7 == 0 else phases[0]
        rows.append(FleetRow(f"http://10.0.{i // 250}.{i % 250}:30000", i, f"node{i:03d}",
                             phase, tone, running=float(i % 9), queued=float(i % 3),
                             tokens_per_s=1000.0 + 17 * i + frame, kv_use=0.4,
                             gpu_used=70.0, gpu_total=80.0))
    return rows


class DataTableFleet(DataTable[Text]):
    """The Fleet table as it was: a DataTable updated cell by cell."""

    def show(self, rows: Sequence[FleetRow]) -> None:
        if not self.row_count:
            self.add_columns(*COLUMNS)
            for row in rows:
                self.add_row(*(Text(t) for t in cells(row)), key=row.key)
            self.shown = list(rows)
            return
        for old, new in zip(self.shown, rows, strict=True):
            for column, before, after in zip(self.columns, cells(old), cells(new), strict=True):
                if before != after:
                    wider = cell_len(after) > self.columns[column].content_width
                    self.update_cell(new.key, column, Text(after), update_width=wider)
        self.shown = list(rows)


class Board(App[None]):
    def __init__(self, make: Callable[[], Widget]) -> None:
        super().__init__()
        self.make = make

    def compose(self) -> ComposeResult:
        yield self.make()


async def cpu_per_frame(make: Callable[[], Widget], count: int, frames: int) -> float:
    """UI-thread CPU seconds per frame while every row changes each frame."""
    app = Board(make)
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one("#table")
        show = table.show  # type: ignore[attr-defined]
        show(fleet(count, 0))
        await pilot.pause()
        started = time.thread_time()
        for frame in range(1, frames + 1):
            show(fleet(count, frame))
            await pilot.pause()
            await app.screen.wait_for_refresh()
        return (time.thread_time() - started) / frames


def row_counts(text: str) -> list[int]:
    """``16,64``: each a count of servers from 1 to 10,000."""
    return [Whole(1, 10_000, "a count of rows")(part) for part in text.split(",")]


def main() -> None:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Checked(row_counts), default=[16, 64],
                        help="server counts, e.g. 16,64")
    parser.add_argument("--frames", type=Whole(1, 10_000), default=20)
    parser.add_argument("--rounds", type=Whole(1, 100), default=3)
    args = parser.parse_args()
    for count in args.rows:
        ours, theirs = [], []
        for _ in range(args.rounds):  # interleaved: both see the same machine
            ours.append(asyncio.run(cpu_per_frame(lambda: FleetTable(id="table"), count,
                                                  args.frames)))
            theirs.append(asyncio.run(cpu_per_frame(lambda: DataTableFleet(id="table"), count,
                                                    args.frames)))
        mine, base = statistics.median(ours), statistics.median(theirs)
        print(f"{count:>4} rows changing: Fleet table {mine * 1000:.1f} ms CPU a frame, "
              f"DataTable {base * 1000:.1f} ms (x{mine / base:.2f})")


if __name__ == "__main__":
    main()

"""Showing a running batch: a live rich panel on a terminal, periodic log lines otherwise.

Both read ``engine.progress()`` snapshots on a timer; neither touches the engine's state.
All server-provided text (URLs, reasons) is rendered literally, never as markup.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TextIO

from eagle_tui.core.capture.progress import CaptureProgress, progress_fields
from eagle_tui.core.capture.report import progress_line
from eagle_tui.core.text import counts_text, terminal_safe
from eagle_tui.tui.render.capture import server_label
from eagle_tui.tui.render.literal_rich import Literal

Snapshot = Callable[[], CaptureProgress]


async def plain_progress(snapshot: Snapshot, interval_s: float, stream: TextIO) -> None:
    """Write a progress line every ``interval_s`` until cancelled."""
    while True:
        await asyncio.sleep(interval_s)
        stream.write(terminal_safe(progress_line(snapshot())) + "\n")
        stream.flush()


async def rich_progress(snapshot: Snapshot, console: Any, refresh_s: float = 0.5) -> None:
    """A live panel on ``console`` (a ``rich.console.Console``) until cancelled."""
    from rich.live import Live

    with Live(Literal(panel(snapshot())), console=console, auto_refresh=False,
              transient=False) as live:
        try:
            while True:
                await asyncio.sleep(refresh_s)
                live.update(Literal(panel(snapshot())), refresh=True)
        finally:
            live.update(Literal(panel(snapshot())), refresh=True)


def panel(snapshot: CaptureProgress) -> Any:
    """The rich renderable of one snapshot: bar, counts, rates, servers, errors."""
    from rich.console import Group
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    p, f = snapshot.counts, progress_fields(snapshot.counts)
    total = p.total or 0
    bar = ProgressBar(total=max(total, 1), completed=min(p.settled, max(total, 1)), width=50)
    head = Text(f" {f.rows} rows  ETA {f.eta}  [{snapshot.state}]")
    counts = Table.grid(padding=(0, 2))
    for _ in range(6):
        counts.add_column(justify="right")
    counts.add_row("done", f.done, "failed", f.failed, "in flight", f.in_flight)
    counts.add_row("saved", f.written, "flagged", f.flagged, "retrying", f.retrying)
    counts.add_row("earlier", f.already_done, "rejected", f.rejected, "samples/s",
                   f.samples_per_s)
    ended = ("not generated", str(snapshot.ended_early)) if snapshot.ended_early else ("", "")
    counts.add_row(*ended, "", "", "tokens/s", f.tokens_per_s)
    labels = [server_label(s.url) for s in snapshot.servers]
    servers = Table(box=None, pad_edge=False)
    # The server cell never shrinks (its port tells servers apart); reasons go below it,
    # one line per server that has one, where they may wrap.
    servers.add_column("server", no_wrap=True, min_width=max(map(len, labels), default=6))
    for header in ("state", "in flight", "sent", "ok", "errors"):
        servers.add_column(header, no_wrap=True)
    for s, label in zip(snapshot.servers, labels, strict=True):
        servers.add_row(Text(label), s.state, f"{s.in_flight}/{s.limit}", str(s.sent),
                        str(s.succeeded), str(s.failed))
    reasons = [Text(f"{label} {s.state}: {s.reason}")
               for s, label in zip(snapshot.servers, labels, strict=True) if s.reason]
    errors = Text(f"errors: {counts_text(snapshot.errors)}   "
                  f"flags: {counts_text(snapshot.flags)}")
    return Group(_row(bar, head), counts, servers, *reasons, errors)


def _row(*cells: Any) -> Any:
    from rich.table import Table

    grid = Table.grid()
    grid.add_row(*cells)
    return grid

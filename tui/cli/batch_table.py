"""Plain-text formatting of batch views for the CLI verbs."""

from __future__ import annotations

import time
from typing import Any

from eagle_tui.core.batches.survey import BatchView
from eagle_tui.core.text import duration, terminal_safe

HEADER = ("ID", "NAME", "STATE", "ROWS", "FAILED", "SAMPLES/S", "TOK/S", "ETA", "PID")


def rows_done(counts: dict[str, Any]) -> int:
    """Rows captured over all runs of the batch."""
    return int(counts.get("already_done") or 0) + int(counts.get("done") or 0)


def table_row(view: BatchView) -> tuple[str, ...]:
    """One line of the ``batches`` table."""
    c, r = view.counts, view.record
    total = c.get("total")
    rows = f"{rows_done(c)}/{total}" if total is not None else str(rows_done(c))
    rate = c.get("samples_per_s")
    tokens = c.get("tokens_per_s")
    return (r.id, r.name, view.state, rows, str(c.get("failed", 0)),
            "-" if rate is None else f"{rate:.2f}", "-" if tokens is None else f"{tokens:.0f}",
            duration(c.get("eta_s"), unknown="-") if view.live else "-",
            str(r.pid) if view.live and r.pid else "-")


def table(views: list[BatchView]) -> str:
    """The ``batches`` table, columns aligned."""
    # Names, states and ids come from records and workers: never let them drive the terminal.
    rows = [HEADER, *(tuple(terminal_safe(c) for c in table_row(v)) for v in views)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
                     .rstrip() for row in rows)


def details(view: BatchView) -> str:
    """Everything about one batch, for ``batches BATCH``."""
    r, c = view.record, view.counts
    lines = [f"batch     {r.id} ({r.name})", f"state     {view.state}"]
    if view.detail:
        lines.append(f"          {view.detail}")
    lines += [f"output    {r.out_dir}", f"log       {r.log}", f"control   {r.socket}",
              f"created   {_when(r.created_at)}   runs {r.runs}"]
    if r.ended_at:
        lines.append(f"ended     {_when(r.ended_at)}")
    total = c.get("total")
    lines.append(f"rows      {rows_done(c)}" + (f" of {total}" if total is not None else "")
                 + f"   failed {c.get('failed', 0)}   rejected {c.get('rejected', 0)}"
                 + f"   flagged {c.get('flagged', 0)}")
    if view.status is not None:
        lines += _live_lines(view.status)
    return "\n".join(terminal_safe(line) for line in lines)


def _live_lines(status: dict[str, Any]) -> list[str]:
    p = status.get("progress", {})
    lines = [f"rate      {p.get('samples_per_s', 0):.2f} samples/s   "
             f"{p.get('tokens_per_s', 0):.0f} tokens/s   in flight {p.get('in_flight', 0)}"
             f"   eta {duration(p.get('eta_s'))}"]
    for server in status.get("servers", []):
        lines.append(f"server    {server['url']}  {server['state']}  "
                     f"{server['in_flight']}/{server['limit']} in flight  {server['reason']}")
    for kind, recent in status.get("recent_errors", {}).items():
        last = recent[-1] if recent else {}
        lines.append(f"error     {kind} x{status.get('errors', {}).get(kind, len(recent))}: "
                     f"{last.get('detail') or ''}")
    lines.append(f"shards    {len(status.get('shards', []))}")
    return lines


def _when(stamp: float | None) -> str:
    if not stamp:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))

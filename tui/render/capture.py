"""Batch snapshots as display text (pure: no widgets, no I/O)."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence

from rich.cells import cell_len

from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.capture.progress import (
    CaptureProgress,
    Progress,
    progress_fields,
    progress_fraction,
)
from eagle_tui.core.text import duration
from eagle_tui.tui.render.batch import BatchSnapshot
from eagle_tui.tui.render.meter import MeterValue

RATE_POINTS = 120
COLUMNS = (
    "batch", "name", "state", "%", "done/total", "smp/s", "tok/s", "ETA", "failed", "flagged"
)
COLUMNS_BY_USE = (
    "batch", "state", "done/total", "ETA", "failed", "flagged", "name", "%", "smp/s", "tok/s"
)
"""Which columns a narrow terminal keeps first: what a batch is and whether it needs a look
(the detail pane below the table draws the rates)."""
CELL_PADDING = 2


def progress_meter(snapshot: BatchSnapshot) -> MeterValue:
    """``1,234/5,000 (24%) · ETA 3m12s`` (or why there is no ETA)."""
    if snapshot.progress is None:
        return MeterValue(None, snapshot.state)
    fraction = progress_fraction(snapshot.progress.counts)
    f = progress_fields(snapshot.progress.counts)
    label = f.rows
    if fraction is not None:
        label += f" ({f.percent})"
    eta = eta_text(snapshot)
    if eta != "—":
        label += f" · ETA {eta}"
    elif snapshot.live and (why := no_eta_reason(snapshot)):
        label += f" · no ETA: {why}"
    return MeterValue(fraction, label)


def no_eta_reason(snapshot: BatchSnapshot) -> str:
    """Why a batch has no ETA now ("" when it has one): an ETA is only a promise while the
    batch runs, finishes samples and has a server to send to."""
    progress = snapshot.progress
    if snapshot.state != BatchState.RUNNING:
        return str(snapshot.state)
    if progress is None or progress.counts.eta_s is None or progress.counts.total is None:
        return "total not counted yet"
    if progress.servers and not any(s.state == "ready" for s in progress.servers):
        return "no server ready"
    if progress.counts.samples_per_s <= 0:
        return "nothing finishing"
    return ""


def eta_text(snapshot: BatchSnapshot) -> str:
    """``3m12s`` while the batch is progressing, ``—`` otherwise (paused, stopping, no
    server up, nothing finishing)."""
    if snapshot.progress is None or no_eta_reason(snapshot):
        return "—"
    return progress_fields(snapshot.progress.counts).eta


def table_cells(snapshot: BatchSnapshot) -> tuple[str, ...]:
    """id, name, state, %, done/total, samples/s, tokens/s, ETA, failed, flagged."""
    name = snapshot.name or "—"
    if snapshot.progress is None:
        return (snapshot.batch_id, name, snapshot.state, "—", "—", "—", "—", "—", "—", "—")
    f = progress_fields(snapshot.progress.counts)
    return (snapshot.batch_id, name, snapshot.state, f.percent, f.rows, f.samples_per_s,
            f.tokens_per_s, eta_text(snapshot), f.failed, f.flagged)


def content_widths(rows: Sequence[Sequence[str]]) -> tuple[int, ...]:
    """Each of the ``COLUMNS``' width in cells: its widest cell, or its header if wider."""
    return tuple(
        max([cell_len(header), *(cell_len(row[i]) for row in rows)])
        for i, header in enumerate(COLUMNS)
    )


def columns_that_fit(widths: Sequence[int], width: int) -> tuple[int, ...]:
    """Indices (in table order) of the ``COLUMNS`` (``widths``: their ``content_widths``)
    that fit in ``width`` cells, taken in ``COLUMNS_BY_USE`` order; the batch id always."""
    padded = [column + CELL_PADDING for column in widths]
    chosen: list[int] = []
    for name in COLUMNS_BY_USE:
        index = COLUMNS.index(name)
        if not chosen or sum(padded[i] for i in chosen) + padded[index] <= width:
            chosen.append(index)
    return tuple(sorted(chosen))


def counts_text(p: Progress, *, stored_tokens: int | None = None, live: bool = True) -> str:
    """``done 1,234 · written 1,200 · failed 3 · flagged 40 · …``; the output tokens of
    this run and its time while a worker runs, else those the shards hold (``stored_tokens``,
    every run), else the last run's, said so."""
    f = progress_fields(p)
    parts = [f"done {f.done}", f"written {f.written}", f"in flight {f.in_flight}",
             f"failed {f.failed}", f"flagged {f.flagged}", f"rejected {f.rejected}",
             f"retrying {f.retrying}"]
    if p.already_done:
        parts.append(f"done before {f.already_done}")
    if stored_tokens is not None:
        parts.append(f"{stored_tokens:,} output tokens stored")
    else:
        last = "" if live else " (last run)"
        parts.append(f"{p.output_tokens:,} tokens in {duration(p.elapsed_s)}{last}")
    return " · ".join(parts)


def kinds_text(title: str, counts: Mapping[str, int], total: int = 0) -> str:
    """``failures: timeout 2, reset 1``, largest first; ``none`` only when ``total`` (the
    batch's own count) is 0 too: a batch that is not running has counts but no kinds."""
    if not counts:
        if total:
            return f"{title}: {total:,} (by kind: not known yet)"
        return f"{title}: none"
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return f"{title}: " + ", ".join(f"{name} {count:,}" for name, count in ordered)


SERVER_LABEL_CELLS = 40
"""Widest server label before its middle is elided (the port and the host's start stay)."""


def server_label(url: str, limit: int = SERVER_LABEL_CELLS) -> str:
    """What tells servers apart in a narrow cell: ``127.0.0.1:30000`` (no ``http://``);
    over ``limit`` characters the middle of the host goes, never the port
    (``gpu-node-017.clu…ample.com:30000``)."""
    label = url.split("://", 1)[-1]
    if len(label) <= limit:
        return label
    host_end = label.find("/") if "/" in label else len(label)
    port_at = label.rfind(":", 0, host_end)
    tail = label[port_at:] if port_at > 0 else ""
    host = label[:port_at] if port_at > 0 else label
    if len(host) + 12 <= limit:  # a long path after the port: its end goes
        return label[: limit - 1] + "…"
    tail = tail[: max(limit // 2, 8)]
    room = max(limit - len(tail) - 1, 4)
    return f"{host[: room - room // 2]}…{host[len(host) - room // 2:]}{tail}"


def servers_text(p: CaptureProgress) -> str:
    """One line per server: ``url  state  in flight 4/8  sent 120 ok 118 failed 2``."""
    lines = []
    for s in p.servers:
        line = (
            f"{s.url}  {s.state}  in flight {s.in_flight}/{s.limit}  "
            f"sent {s.sent:,} ok {s.succeeded:,} failed {s.failed:,}"
        )
        if s.reason:
            line += f"  ({s.reason})"
        lines.append(line)
    return "\n".join(lines) if lines else "no server status yet"


def servers_line(snapshot: BatchSnapshot) -> str:
    """The servers' live state while a worker runs; once none runs, the servers the batch
    was sent to (there is no live state to wait for: not "no server status yet")."""
    p = snapshot.progress
    if snapshot.live or (p is not None and p.servers):
        return servers_text(p) if p is not None else ""
    sent_to = ", ".join(snapshot.servers) or "no server recorded"
    return f"servers {sent_to} · no worker runs ({snapshot.state}): live server state shows " \
           "while the batch runs"


SPARK = " ▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float], width: int) -> str:
    """The newest ``width`` values as bars scaled from 0 to their largest (all zero: a flat
    baseline, never full-height bars)."""
    shown = list(values)[-width:] if width > 0 else []
    top = max(shown, default=0.0)
    if top <= 0:
        return SPARK[1] * len(shown)
    steps = len(SPARK) - 2
    return "".join(SPARK[1 + round(max(0.0, v) / top * steps)] for v in shown)


def sort_key(cell: str) -> tuple[int, float, str]:
    """How a table cell sorts: numbers (``1,234``, ``40%``, ``3m12s`` as text) by value,
    the rest as text, dashes last."""
    text = cell.strip()
    if text in ("", "—", "?"):
        return (2, 0.0, "")
    number = text.split("/")[0].replace(",", "").rstrip("%")
    try:
        return (0, float(number), "")
    except ValueError:
        return (1, 0.0, text.lower())


class BatchHistory:
    """Rates of one batch over time (one point per snapshot the view takes)."""

    def __init__(self, points: int = RATE_POINTS) -> None:
        self.samples_per_s: deque[float] = deque(maxlen=points)
        self.tokens_per_s: deque[float] = deque(maxlen=points)

    def record(self, snapshot: BatchSnapshot) -> None:
        """Add the rates of ``snapshot`` (nothing before the engine has started)."""
        if snapshot.progress is not None and snapshot.live:
            self.samples_per_s.append(snapshot.progress.counts.samples_per_s)
            self.tokens_per_s.append(snapshot.progress.counts.tokens_per_s)


PROBLEM_STATES = frozenset({BatchState.FAILED, BatchState.UNRESPONSIVE, BatchState.INTERRUPTED})


def batch_note(state: BatchState, detail: str | None) -> str:
    """The batch's last word: ``error: …`` only for a batch in trouble; a batch that ended
    well (done, stopped) gets its reason as a note, not an alarm."""
    if not detail:
        return ""
    return f"{'error' if state in PROBLEM_STATES else 'note'}: {detail}"

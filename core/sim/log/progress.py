"""tqdm-style progress bar text, byte for byte what SGLang's bars print.

SGLang's weight loader uses a custom ``bar_format`` (``{desc}: {percentage:3.0f}%
Completed | {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]``);
CUDA-graph capture uses tqdm's default layout with a 10-cell unicode bar (the width tqdm
picks when the stream is not a terminal).
"""

from __future__ import annotations

from typing import Final

_BLOCKS: Final = " ▏▎▍▌▋▊▉█"
_BAR_CELLS: Final = 10


def shard_bar(desc: str, done: int, total: int, elapsed: float) -> str:
    """The weight-loading bar: ``Multi-thread loading shards:  61% Completed | 39/64 [...]``."""
    percent = 100.0 * done / total if total else 100.0
    timing = _timing(done, total, elapsed)
    return f"{desc}: {percent:3.0f}% Completed | {done}/{total} [{timing}]"


def tqdm_bar(desc: str, done: int, total: int, elapsed: float) -> str:
    """tqdm's default bar: ``Capturing batches (bs=8 avail_mem=9.10 GB):  40%|████ | 2/5 [...]``."""
    percent = 100.0 * done / total if total else 100.0
    timing = _timing(done, total, elapsed)
    label = f"{desc}: " if desc else ""  # tqdm drops the colon with the description
    return f"{label}{percent:3.0f}%|{_cells(done, total)}| {done}/{total} [{timing}]"


def format_interval(seconds: float) -> str:
    """tqdm's ``mm:ss`` (``h:mm:ss`` past an hour)."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours:d}:{minutes:02d}:{secs:02d}"
    return f"{minutes:02d}:{secs:02d}"


def _timing(done: int, total: int, elapsed: float) -> str:
    rate = done / elapsed if done and elapsed > 0 else None
    remaining = format_interval((total - done) / rate) if rate else "?"
    return f"{format_interval(elapsed)}<{remaining}, {_rate(rate)}"


def _rate(rate: float | None) -> str:
    # tqdm shows seconds per item once an item takes longer than a second.
    if rate is None:
        return "?it/s"
    if rate < 1:
        return f"{1 / rate:5.2f}s/it"
    return f"{rate:5.2f}it/s"


def _cells(done: int, total: int) -> str:
    filled = _BAR_CELLS * done / total if total else _BAR_CELLS
    full = int(filled)
    partial = int((filled - full) * 8)
    bar = _BLOCKS[-1] * full
    if full < _BAR_CELLS:
        bar += _BLOCKS[partial] if partial else ""
    return bar.ljust(_BAR_CELLS)

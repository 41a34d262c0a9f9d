"""The Arrow memory pool an export allocates from: jemalloc where pyarrow has it.

An export allocates and frees tens of MiB per row group (the group read, its ids' texts, the
loss mask). pyarrow's default pool in its wheels, mimalloc, hands those pages back to the
kernel and faults them in again for the next group: ~0.9 million page faults and 10-12 s of
system time per GiB of shards here. jemalloc, also in the wheels, reuses them: on the same
1 GiB of shards, runs alternated, speculators 19.1-19.8 s against 25.4-26.0, SpecForge 18.2
against 23.1-23.5, parquet 23.6 against 27.8, with the same peak RSS (254-270 MiB) and the same
bytes out (``tests/benchmarks/bench_export.py``).

A user who chose a pool (``ARROW_DEFAULT_MEMORY_POOL``) keeps it; a pyarrow built without
jemalloc keeps its default. The previous pool is back once the export ends, so a process that
exports more than once (tests, a notebook) sees no lasting change.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pyarrow as pa

CHOSEN_BY_USER = "ARROW_DEFAULT_MEMORY_POOL"
"""pyarrow's own variable for its default pool: when set, the export leaves the pool alone."""


@contextlib.contextmanager
def export_memory_pool() -> Iterator[None]:
    """Arrow's default pool is jemalloc inside this block (see the module docstring)."""
    pool = _jemalloc() if not os.environ.get(CHOSEN_BY_USER) else None
    if pool is None:
        yield
        return
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pool)
    try:
        yield
    finally:
        pa.set_memory_pool(previous)


def _jemalloc() -> pa.MemoryPool | None:
    try:
        return pa.jemalloc_memory_pool()
    except NotImplementedError:  # pyarrow built without it (some conda and source builds)
        return None

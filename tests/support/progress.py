"""Engine progress snapshots for tests that render or report one without running a batch."""

from __future__ import annotations

import msgspec

from eagle_tui.core.capture.progress import CaptureProgress, Progress


def snapshot(**fields: object) -> CaptureProgress:
    """A ``CaptureProgress`` from flat fields: counters go into ``counts`` (``settled`` and
    ``remaining`` worked out from them as the engine's tracker does, unless given), the rest
    (state, servers, tables) stay on the snapshot."""
    counts = {k: v for k, v in fields.items() if k in Progress.__struct_fields__}
    outer = {k: v for k, v in fields.items() if k not in Progress.__struct_fields__}
    return CaptureProgress(counts=settled(**counts), **outer)  # type: ignore[arg-type]


def settled(**counts: object) -> Progress:
    """``Progress`` with ``settled`` and ``remaining`` filled in from the other counts."""
    made = Progress(**counts)  # type: ignore[arg-type]
    done = made.already_done + made.done + made.failed + made.rejected
    worked_out = {"settled": done,
                  "remaining": None if made.total is None else max(0, made.total - done)}
    worked_out.update((k, v) for k, v in counts.items() if k in worked_out)
    return msgspec.structs.replace(made, **worked_out)  # type: ignore[arg-type]

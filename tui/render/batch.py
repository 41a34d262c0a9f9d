"""One capture batch at one moment: the value the sources produce and the views render."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eagle_tui.core.batchstate import LIVE_STATES, BatchState
from eagle_tui.core.capture.progress import CaptureProgress


@dataclass(frozen=True)
class BatchSnapshot:
    """One batch at one moment. ``progress`` is None until its counts are known;
    ``resumable`` batches (stopped, failed, interrupted) can be continued by ``resume``."""

    batch_id: str
    out_dir: Path
    prompts: Path
    servers: tuple[str, ...]
    state: BatchState
    tokenizer: Path | None = None
    progress: CaptureProgress | None = None
    error: str | None = None
    name: str = ""
    resumable: bool = False
    stop_grace_s: float | None = None
    """How long a drain lets in-flight requests finish before it aborts them."""
    stored_tokens: int | None = None
    """Output tokens in the batch's shards, all runs, when no worker runs (a worker's
    progress counts only its own run's tokens)."""

    @property
    def live(self) -> bool:
        """True while the batch may still send requests."""
        return self.state in LIVE_STATES

"""How a worker's run of the engine ended, in the terms of the registry and ``end`` event."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from eagle_tui.core.batches.api import End
from eagle_tui.core.batchstate import BatchState, public_state
from eagle_tui.core.capture.engine import CaptureEngine, CaptureSummary
from eagle_tui.core.capture.progress import Progress
from eagle_tui.core.errors import EagleError

log = logging.getLogger(__name__)

EXIT_CANNOT_START = 2
EXIT_INTERNAL = 3


@dataclass(frozen=True)
class RunOutcome:
    """``state`` is ``done``, ``stopped`` or ``failed``."""

    state: BatchState
    reason: str | None
    exit_code: int
    progress: Progress

    def end_event(self) -> End:
        """The body of the ``end`` event."""
        return End(state=self.state, reason=self.reason, exit_code=self.exit_code,
                   progress=self.progress)


async def outcome_of(run: asyncio.Task[CaptureSummary], engine: CaptureEngine) -> RunOutcome:
    """Wait for ``run`` and describe how it ended (never raises for the run's errors)."""
    try:
        summary = await run
    except EagleError as e:  # could not start: config, tokenizer, output directory
        return RunOutcome(BatchState.FAILED, str(e), EXIT_CANNOT_START,
                          engine.progress().counts)
    except Exception as e:
        log.exception("the capture engine failed")
        reason = f"internal error: {type(e).__name__}: {e}; see the batch log"
        return RunOutcome(BatchState.FAILED, reason, EXIT_INTERNAL, engine.progress().counts)
    return RunOutcome(public_state(summary.state), summary.reason, summary.exit_code,
                      summary.progress.counts)

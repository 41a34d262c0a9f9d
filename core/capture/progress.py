"""Progress of a batch: live counters on the event loop, immutable snapshots for readers.

``ProgressTracker`` is updated only from the event loop (no locks); ``snapshot()`` copies
it into a frozen ``CaptureProgress`` that a display, a control API or another thread can
keep as long as it likes. Rates are measured over a sliding window so they follow the
batch's current speed rather than its average since start.

Counting unit: a *row* is one (prompt, sampling preset) pair. A prompt rejected before
sending counts as one rejected row per preset.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.capture.dispatch import ServerStatus
from eagle_tui.core.clock import Clock
from eagle_tui.core.validate import ENDINGS_SHOWN, ending_text

RATE_WINDOW_S = 30.0


@dataclass(frozen=True)
class CaptureProgress:
    """A point-in-time view of a batch. ``total`` is None until the prompts are counted."""

    state: BatchState
    total: int | None
    already_done: int
    done: int
    written: int
    failed: int
    flagged: int
    rejected: int
    retrying: int
    interrupted: int
    in_flight: int
    output_tokens: int
    elapsed_s: float
    samples_per_s: float
    tokens_per_s: float
    eta_s: float | None
    servers: tuple[ServerStatus, ...] = ()
    errors: Mapping[str, int] = field(default_factory=dict)
    failures: Mapping[str, int] = field(default_factory=dict)
    flags: Mapping[str, int] = field(default_factory=dict)
    ended_early: int = 0
    ended_reasons: Mapping[str, int] = field(default_factory=dict)  # turns not generated
    endings: tuple[str, ...] = ()  # the first few ``conversation … ended after turn k: …``

    @property
    def settled(self) -> int:
        """Rows that need no more work this run (done, failed, rejected, done before, or
        turns of conversations that ended before them)."""
        return self.already_done + self.done + self.failed + self.rejected + self.ended_early

    @property
    def remaining(self) -> int | None:
        """Rows still to do, when the total is known."""
        return None if self.total is None else max(0, self.total - self.settled)


class ProgressTracker:
    """Mutable counters behind ``CaptureProgress``."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._started = clock.monotonic()
        self.state = BatchState.STARTING
        self.total: int | None = None
        self.already_done = 0
        self.done = 0
        self.written = 0
        self.failed = 0
        self.flagged = 0
        self.rejected = 0
        self.retrying = 0
        self.interrupted = 0
        self.ended_early = 0  # turns a multi-turn conversation will not reach
        self.ended_reasons: Counter[str] = Counter()
        self.endings: list[str] = []
        self.output_tokens = 0
        self.errors: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.flags: Counter[str] = Counter()
        self._window: deque[tuple[float, int, int]] = deque()

    # -- updates -----------------------------------------------------------------------

    def row_done(self, output_tokens: int, flags: tuple[str, ...]) -> None:
        """A row was generated and validated (it may still sit in the shard buffer)."""
        self.done += 1
        self.output_tokens += output_tokens
        if flags:
            self.flagged += 1
            self.flags.update(flags)
        self._sample_rate()

    def row_failed(self, kind: str) -> None:
        """A row failed permanently (it goes to failures.jsonl)."""
        self.failed += 1
        self.failures[kind] += 1

    def conversation_ended(self, conversation_id: str, turn: int, reason: str,
                           turns_left: int) -> None:
        """A conversation ended after ``turn`` with ``turns_left`` turns never generated."""
        self.ended_early += turns_left
        self.ended_reasons[reason] += turns_left
        if len(self.endings) < ENDINGS_SHOWN:
            self.endings.append(ending_text(conversation_id, turn, reason))

    def attempt_failed(self, kind: str) -> None:
        """One attempt failed (retried or not); feeds the errors-by-kind table."""
        self.errors[kind] += 1

    # -- reading -----------------------------------------------------------------------

    def snapshot(
        self, *, in_flight: int = 0, servers: tuple[ServerStatus, ...] = ()
    ) -> CaptureProgress:
        """A frozen copy of the counters, with rates and ETA computed now."""
        samples_per_s, tokens_per_s = self._rates()
        progress = CaptureProgress(
            state=self.state,
            total=self.total,
            already_done=self.already_done,
            done=self.done,
            written=self.written,
            failed=self.failed,
            flagged=self.flagged,
            rejected=self.rejected,
            retrying=self.retrying,
            interrupted=self.interrupted,
            in_flight=in_flight,
            output_tokens=self.output_tokens,
            elapsed_s=self._clock.monotonic() - self._started,
            samples_per_s=samples_per_s,
            tokens_per_s=tokens_per_s,
            eta_s=None,
            servers=servers,
            errors=MappingProxyType(dict(self.errors)),
            failures=MappingProxyType(dict(self.failures)),
            flags=MappingProxyType(dict(self.flags)),
            ended_early=self.ended_early,
            ended_reasons=MappingProxyType(dict(self.ended_reasons)),
            endings=tuple(self.endings),
        )
        return _with_eta(progress)

    def _sample_rate(self) -> None:
        now = self._clock.monotonic()
        window = self._window
        # One point per 0.25 s is plenty for a 30 s window and keeps this O(1) per row.
        if window and now - window[-1][0] < 0.25:
            window[-1] = (window[-1][0], self.done, self.output_tokens)
        else:
            window.append((now, self.done, self.output_tokens))
        while len(window) > 2 and now - window[1][0] > RATE_WINDOW_S:
            window.popleft()

    def _rates(self) -> tuple[float, float]:
        if not self._window:
            return 0.0, 0.0
        start_t, start_done, start_tokens = self._window[0]
        if len(self._window) == 1:
            start_t, start_done, start_tokens = self._started, 0, 0
        span = self._clock.monotonic() - start_t
        if span <= 0:
            return 0.0, 0.0
        return (self.done - start_done) / span, (self.output_tokens - start_tokens) / span


def _with_eta(progress: CaptureProgress) -> CaptureProgress:
    remaining = progress.remaining
    if remaining is None or progress.samples_per_s <= 0:
        eta = 0.0 if remaining == 0 else None
    else:
        eta = remaining / progress.samples_per_s
    return replace(progress, eta_s=eta)

"""Progress of a batch: live counters on the event loop, immutable snapshots for readers.

``ProgressTracker`` is updated only from the event loop (no locks); ``snapshot()`` copies
it into a frozen ``CaptureProgress`` that a display, a control API or another thread can
keep as long as it likes. Rates are measured over a sliding window so they follow the
batch's current speed rather than its average since start.

Both are msgspec structs, declared once: ``Progress`` is the counters, rates and ETA, the
``progress`` object of the control API's documents and what a registry record keeps as a
batch's last known progress; ``CaptureProgress`` is the whole snapshot: the state, those
counts, the servers and the per-kind tables, which the documents carry beside ``progress``.

Counting unit: a *row* is one (prompt, sampling preset) pair. A prompt rejected before
sending counts as one rejected row per preset.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import NamedTuple

import msgspec

from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.capture.dispatch import ServerStatus
from eagle_tui.core.clock import Clock
from eagle_tui.core.text import duration
from eagle_tui.core.validate import ENDINGS_SHOWN, ending_text
from eagle_tui.core.wire import Wire

RATE_WINDOW_S = 30.0


class Progress(Wire, frozen=True):
    """Counters, rates (rounded for display) and ETA of a batch. ``total`` is None until the
    prompts are counted; ``settled`` rows need no more work this run (done, failed, rejected,
    done before, or turns of conversations that ended before them); ``remaining`` is None
    while the total is unknown.

    Every field has a default: the registry's records from before a worker saved any
    progress hold ``{}``.
    """

    total: int | None = None
    already_done: int = 0
    done: int = 0
    written: int = 0
    failed: int = 0
    flagged: int = 0
    rejected: int = 0
    retrying: int = 0
    interrupted: int = 0
    in_flight: int = 0
    output_tokens: int = 0
    settled: int = 0
    remaining: int | None = None
    elapsed_s: float = 0.0
    samples_per_s: float = 0.0
    tokens_per_s: float = 0.0
    eta_s: float | None = None


class ProgressFields(NamedTuple):
    """A ``Progress`` as people read it, in one convention for every renderer (capture's log
    line and live panel, the dashboard's table and meter, the ``batches`` table): counts
    with thousands separators, samples/s to a tenth, tokens/s whole, the ETA a duration."""

    rows: str  # settled of total, ``1,234/5,000`` (``1,234/?`` until the prompts are counted)
    percent: str  # settled over total, ``24%``
    samples_per_s: str
    tokens_per_s: str
    eta: str
    done: str
    written: str
    already_done: str
    failed: str
    flagged: str
    rejected: str
    retrying: str
    in_flight: str


def progress_fraction(p: Progress) -> float | None:
    """Settled rows over the total (None until the prompts are counted)."""
    return min(1.0, p.settled / p.total) if p.total else None


def progress_fields(p: Progress, unknown: str = "—") -> ProgressFields:
    """``p``'s fields as text; ``unknown`` stands for a percent or ETA not known."""
    fraction = progress_fraction(p)
    return ProgressFields(
        rows=f"{p.settled:,}/{'?' if p.total is None else f'{p.total:,}'}",
        percent=unknown if fraction is None else f"{fraction:.0%}",
        samples_per_s=f"{p.samples_per_s:.1f}", tokens_per_s=f"{p.tokens_per_s:,.0f}",
        eta=duration(p.eta_s, unknown), done=f"{p.done:,}", written=f"{p.written:,}",
        already_done=f"{p.already_done:,}", failed=f"{p.failed:,}", flagged=f"{p.flagged:,}",
        rejected=f"{p.rejected:,}", retrying=f"{p.retrying:,}", in_flight=f"{p.in_flight:,}")


class CaptureProgress(msgspec.Struct, frozen=True, kw_only=True):
    """A point-in-time view of a batch: its state, its ``counts``, its servers, attempt
    errors, permanent failures and flags by kind, and (multi-turn) the turns that conversations
    ending early will not reach (already in ``counts.settled``)."""

    state: BatchState
    counts: Progress = Progress()
    servers: tuple[ServerStatus, ...] = ()
    errors: dict[str, int] = {}
    failures: dict[str, int] = {}
    flags: dict[str, int] = {}
    ended_early: int = 0
    ended_reasons: dict[str, int] = {}  # turns not generated, per reason
    endings: tuple[str, ...] = ()  # the first few ``conversation … ended after turn k: …``


class ProgressTracker:
    """Mutable counters behind ``CaptureProgress``."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._started = clock.monotonic()
        self._rate_start = self._started
        self._paused_at: float | None = None
        self._state = BatchState.STARTING
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

    @property
    def state(self) -> BatchState:
        """Where the batch is (starting, running, paused, stopping, …)."""
        return self._state

    @state.setter
    def state(self, state: BatchState) -> None:
        now = self._clock.monotonic()
        if state == BatchState.PAUSED and self._paused_at is None:
            self._paused_at = now
        elif state != BatchState.PAUSED and self._paused_at is not None:
            self._skip_pause(now - self._paused_at)
            self._paused_at = None
        self._state = state

    def _skip_pause(self, paused_s: float) -> None:
        """Rates (and so the ETA) after a resume leave the pause out: the window's points
        move forward by its length, as if the batch had not stopped."""
        self._rate_start += paused_s
        self._window = deque((t + paused_s, done, tokens) for t, done, tokens in self._window)

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
        return CaptureProgress(
            state=self.state, counts=self._counts(in_flight), servers=servers,
            errors=dict(self.errors), failures=dict(self.failures), flags=dict(self.flags),
            ended_early=self.ended_early, ended_reasons=dict(self.ended_reasons),
            endings=tuple(self.endings))

    def _counts(self, in_flight: int) -> Progress:
        samples_per_s, tokens_per_s = self._rates()
        settled = (self.already_done + self.done + self.failed + self.rejected
                   + self.ended_early)
        remaining = None if self.total is None else max(0, self.total - settled)
        if remaining == 0:
            eta: float | None = 0.0
        elif remaining is None or samples_per_s <= 0 or self._state != BatchState.RUNNING:
            eta = None  # a promise only while requests are being sent (not paused, stopping)
        else:
            eta = remaining / samples_per_s
        return Progress(
            total=self.total, already_done=self.already_done, done=self.done,
            written=self.written, failed=self.failed, flagged=self.flagged,
            rejected=self.rejected, retrying=self.retrying, interrupted=self.interrupted,
            in_flight=in_flight, output_tokens=self.output_tokens, settled=settled,
            remaining=remaining, elapsed_s=round(self._clock.monotonic() - self._started, 3),
            samples_per_s=round(samples_per_s, 3), tokens_per_s=round(tokens_per_s, 1),
            eta_s=None if eta is None else round(eta, 1))

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
            start_t, start_done, start_tokens = self._rate_start, 0, 0
        span = self._clock.monotonic() - start_t
        if span <= 0:
            return 0.0, 0.0
        return (self.done - start_done) / span, (self.output_tokens - start_tokens) / span


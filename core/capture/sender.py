"""Sending one job until it succeeds, fails for good, or the batch stops.

Each attempt takes a slot on the least-loaded ready server, gets a fresh rid, and is
bounded by the per-request timeout. Failures are classified (``core.capture.retry``):
transient ones are retried after a jittered backoff until the sample's budget is spent,
permanent ones end the job. A timed-out request is also aborted on the server, where it
would otherwise keep generating for nobody.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from eagle_tui.core.capture.config import RetryPolicy
from eagle_tui.core.capture.control import RunControl
from eagle_tui.core.capture.dispatch import NoServerLeft, PoolClosed, Server, ServerPool
from eagle_tui.core.capture.events import DeltaEvent, EventSink, RequestEvent
from eagle_tui.core.capture.progress import ProgressTracker
from eagle_tui.core.capture.render import Job
from eagle_tui.core.capture.retry import ServerAction, Verdict, classify
from eagle_tui.core.capture.rids import RidAllocator
from eagle_tui.core.clock import Clock
from eagle_tui.core.errors import RequestAborted, ServerTimeout
from eagle_tui.core.sampling import SamplingPreset
from eagle_tui.core.sglang.types import GenerateRequest, GenerateResult, SamplingParams, TokenDelta

log = logging.getLogger(__name__)

OutcomeKind = Literal["ok", "failed", "interrupted"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a job ended. ``result`` and ``server`` are set for ``ok``; ``error_kind`` and
    ``reason`` for ``failed``; ``interrupted`` means the batch stopped first (the row is
    left for the next resume)."""

    kind: OutcomeKind
    attempts: int
    result: GenerateResult | None = None
    endpoint: str | None = None
    rid: str | None = None
    error_kind: str | None = None
    reason: str | None = None


class Sender:
    """Sends jobs through ``pool``; one instance serves all of a batch's workers."""

    def __init__(
        self,
        pool: ServerPool,
        *,
        sampling: Mapping[str, SamplingParams],
        retry: RetryPolicy,
        timeout_s: float,
        control: RunControl,
        progress: ProgressTracker,
        clock: Clock,
        rids: RidAllocator | None = None,
        rng: random.Random | None = None,
        sink: EventSink | None = None,
        on_fatal: Callable[[str], None] = lambda reason: None,
        redact: Callable[[str], str] = lambda text: text,
    ) -> None:
        self._pool = pool
        self.sampling = sampling
        self._retry = retry
        self._timeout_s = timeout_s
        self._control = control
        self._progress = progress
        self._clock = clock
        self.rids = rids or RidAllocator()
        self._rng = rng or random.Random()
        self._sink = sink
        self._on_fatal = on_fatal
        self._redact = redact
        self._background: set[asyncio.Task[None]] = set()

    async def send(self, job: Job) -> Outcome:
        """Send ``job`` until it ends one way or another."""
        attempts = charged = 0
        failed_on: Server | None = None
        while True:
            await self._control.wait_unpaused()
            if self._control.stopping:
                return Outcome("interrupted", attempts)
            try:
                server = await self._pool.acquire(avoid=failed_on, prefer=job.prefer)
            except PoolClosed:
                return Outcome("interrupted", attempts)
            except NoServerLeft as e:
                # Not this row's fault: end the batch rather than fail every row left.
                self._on_fatal(self._redact(str(e)))
                return Outcome("interrupted", attempts)
            attempts += 1
            rid = self.rids.next()
            try:
                result = await self._attempt(server, job, rid, attempts)
            except asyncio.CancelledError:  # the stop gave up waiting for the abort
                self._pool.give_back(server)
                raise
            except _Cut:  # the batch is stopping and cut this request: resume sends it again
                self._pool.give_back(server)
                return Outcome("interrupted", attempts)
            except Exception as error:  # every failure is classified; bugs become "internal"
                if self._stop_aborted(server, rid, error):
                    self._pool.give_back(server)
                    return Outcome("interrupted", attempts)
                self._pool.release(server, ok=False)
                verdict = self._judge(server, rid, error)
                charged += verdict.counts
                end = self._ending(verdict, error, attempts, charged, server.url, rid)
                if end is not None:
                    return end
                if self._sink is not None:
                    self._sink(RequestEvent(
                        kind="retry", sample_id=job.sample_id, at=self._clock.wall(), rid=rid,
                        endpoint=server.url, attempt=attempts, error_kind=verdict.kind,
                        detail=self._describe(error)))
                await self._backoff(charged)
                failed_on = server
                continue
            self._pool.release(server, ok=True)
            return Outcome("ok", attempts, result=result, endpoint=server.url, rid=rid)

    def _stop_aborted(self, server: Server, rid: str, error: Exception) -> bool:
        """True when ``error`` is the answer to the stop's own ``/abort_request`` for
        ``rid`` (a second Ctrl-C, ``stop --abort``): the user's doing, not a failure of the
        server, so it neither counts against it nor pauses it."""
        if isinstance(error, RequestAborted) and rid in server.aborted:
            server.aborted.discard(rid)
            return True
        return False

    def _ending(
        self, verdict: Verdict, error: Exception, attempts: int, charged: int, url: str,
        rid: str,
    ) -> Outcome | None:
        """The outcome when this failure ends the job, None when it is retried."""
        if verdict.kind == "internal":
            log.error("internal error while sending to %s (rid %s)", url, rid, exc_info=error)
        if verdict.retry and self._control.stopping:
            return Outcome("interrupted", attempts)
        if not verdict.retry:
            return Outcome("failed", attempts, endpoint=url, rid=rid, error_kind=verdict.kind,
                           reason=self._describe(error))
        if charged >= self._retry.max_attempts:
            reason = f"{self._describe(error)} (gave up after {attempts} attempts)"
            return Outcome("failed", attempts, endpoint=url, rid=rid, error_kind=verdict.kind,
                           reason=reason)
        return None

    async def _attempt(self, server: Server, job: Job, rid: str, attempt: int) -> GenerateResult:
        request = GenerateRequest(job.prompt_ids, self.sampling[job.preset.name], rid=rid)
        watched = self._control.take_watch()
        if self._sink is not None:
            self._sink(RequestEvent(kind="sent", sample_id=job.sample_id, at=self._clock.wall(),
                                    rid=rid, endpoint=server.url, attempt=attempt,
                                    watched=watched))
        try:
            async with asyncio.timeout(self._timeout_s) as scope:
                server.attempts[scope] = rid
                try:
                    if watched:
                        return await server.client.generate_streaming(
                            request, self._delta_reporter(job), timeout=self._timeout_s
                        )
                    return await server.client.generate(request, timeout=self._timeout_s)
                finally:
                    del server.attempts[scope]
        except TimeoutError:
            if server.cut:
                raise _Cut from None
            raise ServerTimeout(
                f"no answer within the request timeout of {self._timeout_s:g} s", url=server.url
            ) from None

    def _judge(self, server: Server, rid: str, error: Exception) -> Verdict:
        """Classify ``error`` and apply what it implies for the server."""
        verdict = classify(error)
        self._progress.attempt_failed(verdict.kind)
        if verdict.server is ServerAction.PAUSE:
            self._pool.pause(server, f"{verdict.kind}: {self._describe(error)}")
        elif verdict.server is ServerAction.REFUSE:
            self._pool.refuse(server, self._describe(error))
        else:
            self._pool.note_error(server)
        if verdict.kind == "timeout":
            self._abort_later(server, rid)
        return verdict

    async def _backoff(self, charged: int) -> None:
        """Wait before the next attempt; a stop ends the wait early."""
        self._progress.retrying += 1
        delay = self._retry.delay(max(charged, 1), self._rng)
        waits = [asyncio.ensure_future(self._clock.sleep(delay)),
                 asyncio.ensure_future(self._control.wait_stop())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._progress.retrying -= 1
            for wait in waits:
                wait.cancel()

    def _abort_later(self, server: Server, rid: str) -> None:
        """Abort ``rid`` on ``server`` in the background (best effort)."""

        async def abort() -> None:
            try:
                await server.checks.abort(rid)
            except Exception as e:  # the server may be down; its request dies with it
                log.debug("abort of %s on %s failed: %s", rid, server.url, e)

        task = asyncio.ensure_future(abort())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _delta_reporter(self, job: Job) -> Callable[[TokenDelta], None]:
        def report(delta: TokenDelta) -> None:
            if self._sink is not None:
                self._sink(DeltaEvent(sample_id=job.sample_id, rid=delta.rid,
                                      new_ids=delta.new_ids, total=delta.total,
                                      at=self._clock.wall()))

        return report

    def _describe(self, error: BaseException) -> str:
        """``Type: message`` of ``error``, with credentials scrubbed."""
        return self._redact(_describe(error))

    async def drain_background(self) -> None:
        """Wait for background aborts to settle (at shutdown)."""
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)


class _Cut(Exception):
    """A stop ended this request on purpose (``Server.cut_in_flight``): not a failure."""


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def sampling_params(
    preset: SamplingPreset,
    *,
    max_new_tokens: int,
    stop_token_ids: tuple[int, ...],
    extra: Mapping[str, object],
) -> SamplingParams:
    """The ``sampling_params`` sent for ``preset``: explicit length and stop ids, raw ids."""
    return SamplingParams(
        max_new_tokens=max_new_tokens,
        temperature=preset.temperature,
        top_p=preset.top_p,
        top_k=preset.top_k,
        min_p=preset.min_p,
        stop_token_ids=stop_token_ids,
        skip_special_tokens=False,
        no_stop_trim=True,
        sampling_seed=preset.seed,
        extra=dict(extra),
    )

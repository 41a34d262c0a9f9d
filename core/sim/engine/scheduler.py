"""Continuous batching: one loop steps every running request by a token per step.

Requests enter a FIFO waiting queue and are admitted while fewer than
``max_running_requests`` run. An admitted request "prefills" for ``ttft``
seconds, then gains one token per step. A step lasts ``1 / tokens_per_s``,
stretched by ``running / capacity`` once more requests run than the capacity,
the way a real batch slows down as it grows. With ``tokens_per_s == 0`` steps
take no time, and a non-streaming request is finished in a single step.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from typing import Final

from eagle_tui.core.sim.config import SpecSettings
from eagle_tui.core.sim.engine.prefix_cache import PrefixCache
from eagle_tui.core.sim.engine.speculation import SpecLogWindow, new_counts
from eagle_tui.core.sim.engine.stats import Stats
from eagle_tui.core.sim.log.dialect import DecodeStats, PrefillStats
from eagle_tui.core.sim.log.sink import SimLog
from eagle_tui.core.sim.model.detok import output_text
from eagle_tui.core.sim.model.fake_model import FakeModel, plan_seed
from eagle_tui.core.sim.model.modeldir import ModelDir
from eagle_tui.core.sim.model.prompt_shape import read_prompt
from eagle_tui.core.sim.request import (
    WAITING_ABORT,
    SimRequest,
    abort_finish,
    length_finish,
    stop_finish,
)

MAX_BURST: Final = 4096  # tokens per step in fast mode: keeps the event loop responsive


class Scheduler:
    """Owns the waiting queue and the running batch."""

    def __init__(self, *, model_dir: ModelDir, model: FakeModel, log: SimLog, stats: Stats,
                 cache: PrefixCache, tokens_per_s: float, ttft: float, capacity: int,
                 max_running: int, max_total_tokens: int, max_req_input_len: int,
                 on_out_of_vocab: Callable[[SimRequest], None],
                 spec: SpecSettings | None = None, decode_log_interval: int = 40) -> None:
        self._model_dir = model_dir
        self._model = model
        self._log = log
        self._stats = stats
        self._cache = cache
        self._tokens_per_s = tokens_per_s
        self._ttft = ttft
        self._capacity = capacity
        self._max_running = max_running
        self._max_total_tokens = max_total_tokens
        self._max_req_input_len = max_req_input_len
        self._on_out_of_vocab = on_out_of_vocab
        self._spec = spec if spec is not None and spec.enabled else None
        self.spec_log = SpecLogWindow()
        self._decode_log_interval = decode_log_interval
        self._waiting: deque[SimRequest] = deque()
        self._running: list[SimRequest] = []
        self._wakeup = asyncio.Event()
        self._decode_steps = 0
        self._last_prefill_log = time.monotonic()
        self._dead = False

    # ---- what the HTTP side uses ------------------------------------------------

    def submit(self, request: SimRequest) -> None:
        """Queue ``request`` (FIFO)."""
        self._waiting.append(request)
        self._wakeup.set()

    def abort(self, rid_prefix: str, *, abort_all: bool = False) -> int:
        """Abort requests whose rid starts with ``rid_prefix`` (SGLang matches prefixes)."""
        matched = 0
        for request in list(self._waiting):
            if abort_all or request.rid.startswith(rid_prefix):
                self._waiting.remove(request)
                request.finish_with(WAITING_ABORT)
                self._stats.aborted += 1
                matched += 1
        for request in self._running:
            if not request.finished and (abort_all or request.rid.startswith(rid_prefix)):
                request.abort_requested = True
                matched += 1
        self._wakeup.set()
        return matched

    def cancel(self, request: SimRequest) -> None:
        """Abort one request (its client went away)."""
        if request in self._waiting:
            self._waiting.remove(request)
            request.finish_with(WAITING_ABORT)
            self._stats.aborted += 1
        elif not request.finished:
            request.abort_requested = True
            self._wakeup.set()

    def halt(self) -> None:
        """Stop stepping for good (the scheduler process died)."""
        self._dead = True
        self._wakeup.set()

    @property
    def running_count(self) -> int:
        """Requests in the running batch."""
        return len(self._running)

    @property
    def queued_count(self) -> int:
        """Requests waiting for a slot."""
        return len(self._waiting)

    @property
    def kv_tokens(self) -> int:
        """Tokens held by running requests (prompt + output)."""
        return sum(len(r.item.input_ids) + len(r.output_ids) for r in self._running)

    @property
    def token_usage(self) -> float:
        """``kv_tokens`` as a share of the KV pool."""
        return self.kv_tokens / self._max_total_tokens if self._max_total_tokens else 0.0

    # ---- the loop -----------------------------------------------------------------

    async def run(self) -> None:
        """Step forever (until an out-of-vocabulary id kills the "GPU")."""
        while not self._dead:
            self._admit()
            if self._dead:
                return
            if not self._running:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            now = time.monotonic()
            self._apply_aborts()
            decoding = [r for r in self._running if not r.finished and r.first_token_at <= now]
            if decoding:
                step_started = now
                self._step(decoding)
                self._retire()
                await self._pace(step_started)
            else:
                self._retire()
                await self._sleep_until_first_token()

    def _admit(self) -> None:
        admitted: list[SimRequest] = []
        while self._waiting and len(self._running) < self._max_running:
            request = self._waiting.popleft()
            if request.finished:
                continue
            if len(request.item.input_ids) >= self._max_req_input_len:
                request.finish_with(abort_finish(self._too_long_message(request), 400))
                continue
            if not _in_vocab(request.item.input_ids, self._model_dir.vocab_size):
                self._dead = True  # the embedding lookup fails and the scheduler dies
                self._on_out_of_vocab(request)
                return
            self._start(request)
            admitted.append(request)
        if admitted:
            self._log_prefill(admitted)

    def _start(self, request: SimRequest) -> None:
        ids = request.item.input_ids
        spec = request.item.sampling
        request.cached_tokens = self._cache.cached_tokens(ids)
        self._cache.insert(ids)
        seed = plan_seed(ids, spec.temperature, spec.top_p, spec.top_k, spec.sampling_seed)
        request.plan = self._model.plan(ids, seed)
        if self._spec is not None:
            request.spec = new_counts(self._spec, read_prompt(ids, self._model_dir), seed)
        request.first_token_at = time.monotonic() + self._ttft
        self._running.append(request)
        self._stats.requests += 1
        self._stats.prompt_tokens += len(ids)
        self._stats.cached_tokens += request.cached_tokens

    def _apply_aborts(self) -> None:
        for request in self._running:
            if request.abort_requested and not request.finished:
                request.finish_with(abort_finish())
                self._stats.aborted += 1

    def _step(self, decoding: list[SimRequest]) -> None:
        fast = self._tokens_per_s <= 0
        verified = False
        for request in decoding:
            first = not request.output_ids
            budget = MAX_BURST if fast and not request.streaming else 1
            emitted = 0
            while emitted < budget:
                if request.spec is not None and request.output_ids:
                    verified = True
                    done, count = self._verify_step(request)
                else:  # the prefill's token (or no speculation)
                    done, count = self._emit(request), 1
                emitted += count
                if done:
                    break
            if first:
                self._stats.ttft.observe(time.monotonic() - request.created)
            if request.streaming:  # a finish wakes every waiter; tokens only streamers
                request.notify.set()
        if self._spec is not None and not verified:
            return  # a prefill-only step: SGLang logs decode lines for decode batches only
        self._decode_steps += 1
        if self._decode_steps % self._decode_log_interval == 0:
            self._log_decode()

    def _verify_step(self, request: SimRequest) -> tuple[bool, int]:
        """One verify step: 1 + accepted drafts tokens; (finished, tokens emitted)."""
        counts = request.spec
        assert counts is not None and request.plan is not None
        while len(request.lookahead) < counts.drafts_per_step:
            request.lookahead.append(next(request.plan))
        correct = counts.accepted(request.output_ids, request.lookahead)
        emitted = 0
        done = False
        while emitted < 1 + correct and not done:
            done = self._emit(request)
            emitted += 1
        finish = request.finish or {}
        if done and finish.get("type") == "stop":
            correct = min(correct, emitted - 1)  # nothing is accepted past the stop token
        counts.record(correct)
        self.spec_log.add(correct, counts.drafts_per_step)
        return done, emitted

    def _next_token(self, request: SimRequest) -> int:
        if request.lookahead:
            return request.lookahead.popleft()
        assert request.plan is not None
        return next(request.plan)

    def _emit(self, request: SimRequest) -> bool:
        """Append one token; True when the request is finished."""
        spec = request.item.sampling
        out = request.output_ids
        if len(out) >= spec.max_new_tokens:
            request.finish_with(length_finish(spec.max_new_tokens))
            return True
        token = self._next_token(request)
        honour_stop = not spec.ignore_eos
        while honour_stop and token in request.stop_ids and len(out) < spec.min_new_tokens:
            token = self._next_token(request)  # a real sampler masks stop tokens until then
        out.append(token)
        if request.spec is not None:
            request.spec.observe(out)
        self._stats.generation_tokens += 1
        self._stats.window_tokens += 1
        # SGLang checks the length before the stop token, so a stop token at the
        # max_new_tokens-th position finishes with "length".
        if len(out) >= spec.max_new_tokens:
            request.finish_with(length_finish(spec.max_new_tokens))
        elif honour_stop and token in request.stop_ids:
            request.finish_with(stop_finish(token))
        elif spec.stop_strings:
            self._check_stop_strings(request)
        return request.finished

    def _check_stop_strings(self, request: SimRequest) -> None:
        text = output_text(self._model_dir, request)
        for stop in request.item.sampling.stop_strings:
            position = text.find(stop)
            if stop and position >= 0:
                keep = request.item.sampling.no_stop_trim
                request.stop_text_end = position + len(stop) if keep else position
                request.finish_with(stop_finish(stop))
                return

    def _retire(self) -> None:
        if not any(r.finished for r in self._running):
            return
        still_running = []
        for request in self._running:
            if request.finished:
                self._cache.insert(request.item.input_ids + request.output_ids)
                self._stats.e2e.observe(request.e2e_latency)
                self._observe_finished(request)
            else:
                still_running.append(request)
        self._running = still_running

    def _observe_finished(self, request: SimRequest) -> None:
        stats = self._stats
        stats.finished_requests += 1
        stats.finished_generation_tokens += len(request.output_ids)
        if request.spec is not None:
            stats.spec_verify_calls += request.spec.verify_steps

    async def _pace(self, step_started: float) -> None:
        if self._tokens_per_s <= 0:
            await asyncio.sleep(0)  # let handlers send what this step produced
            return
        stretch = max(1.0, len(self._running) / self._capacity)
        step = stretch / self._tokens_per_s
        self._stats.inter_token.observe(step)
        delay = step_started + step - time.monotonic()
        await asyncio.sleep(max(delay, 0.0))

    async def _sleep_until_first_token(self) -> None:
        waiting_for = [r.first_token_at for r in self._running if not r.finished]
        if not waiting_for:
            return
        self._wakeup.clear()
        timeout = max(min(waiting_for) - time.monotonic(), 0.0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), timeout)

    # ---- log lines ----------------------------------------------------------------

    def _log_prefill(self, admitted: list[SimRequest]) -> None:
        now = time.monotonic()
        new_tokens = sum(len(r.item.input_ids) - r.cached_tokens for r in admitted)
        elapsed = max(now - self._last_prefill_log, 1e-3)
        self._last_prefill_log = now
        self._log.rank(0, self._log.dialect.prefill_line(PrefillStats(
            new_seq=len(admitted), new_tokens=new_tokens,
            cached_tokens=sum(r.cached_tokens for r in admitted),
            cache_hit_rate=self._stats.cache_hit_rate, token_usage=self.token_usage,
            running=len(self._running) - len(admitted), queued=len(self._waiting),
            input_throughput=new_tokens / elapsed,
        )))

    def _log_decode(self) -> None:
        accept = self.spec_log.close() if self._spec is not None else None
        self._log.rank(0, self._log.dialect.decode_line(DecodeStats(
            running=len(self._running), tokens=self.kv_tokens, token_usage=self.token_usage,
            throughput=self._stats.close_window(), queued=len(self._waiting),
            accept=accept,
        )))

    def _too_long_message(self, request: SimRequest) -> str:
        return (
            f"Input length ({len(request.item.input_ids)} tokens) exceeds the maximum allowed "
            f"length ({self._max_req_input_len} tokens). Use a shorter input or enable "
            "--allow-auto-truncate."
        )


def _in_vocab(ids: list[int], vocab_size: int) -> bool:
    return not ids or (min(ids) >= 0 and max(ids) < vocab_size)

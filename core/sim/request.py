"""One generation as the sim tracks it: validated input, then live output state.

``GenerateItem`` is what request validation produces (one per batch element);
``SimRequest`` is the mutable record the scheduler advances and the HTTP
handler reads. Handlers wait on ``notify``, an event shared by every item of
one HTTP request, so a batch stream wakes once per scheduler step.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

FinishReason = dict[str, Any]


@dataclass(frozen=True)
class SamplingSpec:
    """The ``sampling_params`` the sim acts on, after SGLang's defaults and checks."""

    max_new_tokens: int = 128
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_new_tokens: int = 0
    stop_token_ids: frozenset[int] = frozenset()
    stop_strings: tuple[str, ...] = ()
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    no_stop_trim: bool = False
    sampling_seed: int | None = None


@dataclass(frozen=True)
class LogprobSpec:
    """What ``return_logprob`` and friends asked for."""

    enabled: bool = False
    start_len: int = -1  # -1: output tokens only
    top_num: int = 0
    with_text: bool = False


@dataclass(frozen=True)
class GenerateItem:
    """One validated prompt of a ``/generate`` call."""

    rid: str
    input_ids: list[int]
    sampling: SamplingSpec = SamplingSpec()
    logprobs: LogprobSpec = LogprobSpec()


def length_finish(length: int) -> FinishReason:
    """``{"type": "length", "length": N}``."""
    return {"type": "length", "length": length}


def stop_finish(matched: int | str) -> FinishReason:
    """``{"type": "stop", "matched": id-or-string}``."""
    return {"type": "stop", "matched": matched}


def abort_finish(message: str = "Aborted", status_code: int | None = None) -> FinishReason:
    """A running request's abort (``/abort_request``, disconnect, scheduler error)."""
    return {"type": "abort", "message": message, "status_code": status_code, "err_type": None}


WAITING_ABORT: FinishReason = {"type": "abort", "message": "Abort in waiting queue"}


@dataclass
class SpecCounts:
    """One request's verify steps and accepted drafts, as ``meta_info`` reports them; with
    the n-gram index of its output (bigram -> the token that last followed it)."""

    drafts_per_step: int
    probabilities: tuple[float, ...]
    rng: random.Random
    verify_steps: int = 0
    correct_drafts: int = 0
    histogram: list[int] = field(default_factory=list)
    follows: dict[tuple[int, int], int] = field(default_factory=dict)

    def observe(self, output: Sequence[int]) -> None:
        """Index the token just appended to ``output``."""
        if len(output) >= 3:
            self.follows[(output[-3], output[-2])] = output[-1]

    def guess(self, output: Sequence[int]) -> list[int]:
        """The n-gram drafts: follow the bigram chain from the output's last two tokens."""
        if len(output) < 2:
            return []
        context = (output[-2], output[-1])
        drafts: list[int] = []
        while len(drafts) < self.drafts_per_step:
            token = self.follows.get(context)
            if token is None:
                break
            drafts.append(token)
            context = (context[1], token)
        return drafts

    def accepted(self, output: Sequence[int], planned: Sequence[int]) -> int:
        """Drafts the target accepts in this step, given the tokens it will emit next."""
        matched = 0
        for draft, token in zip(self.guess(output), planned, strict=False):
            if draft != token:
                break
            matched += 1
        sampled = 0
        while sampled < len(self.probabilities) and self.rng.random() < self.probabilities[sampled]:
            sampled += 1
        return max(matched, sampled) if self.probabilities else 0

    def record(self, correct: int) -> None:
        """Count one verify step that accepted ``correct`` drafts."""
        self.verify_steps += 1
        self.correct_drafts += correct
        while len(self.histogram) <= correct:
            self.histogram.append(0)
        self.histogram[correct] += 1

    @property
    def proposed_drafts(self) -> int:
        """Verify steps x drafts per step (SGLang's ``spec_num_proposed_drafts``)."""
        return self.verify_steps * self.drafts_per_step


@dataclass(eq=False)
class SimRequest:
    """A request in flight: its input, planned output, and what has been produced."""

    item: GenerateItem
    notify: asyncio.Event
    stop_ids: frozenset[int]
    streaming: bool = False  # streamed requests advance one token per step even in fast mode
    created: float = field(default_factory=time.monotonic)
    plan: Iterator[int] | None = None
    output_ids: list[int] = field(default_factory=list)
    finish: FinishReason | None = None
    finished_at: float | None = None
    first_token_at: float = 0.0  # monotonic time the prefill "ends"
    cached_tokens: int = 0
    abort_requested: bool = False
    stop_text_end: int | None = None  # where a matched stop string cuts the text
    text_cache: str = ""  # decoded text of output_ids[:text_cache_upto]
    text_cache_upto: int = 0
    spec: SpecCounts | None = None  # speculative decoding's counts, when it is on
    lookahead: deque[int] = field(default_factory=deque)  # planned ids a verify step peeked

    @property
    def rid(self) -> str:
        """The request id (``meta_info.id``)."""
        return self.item.rid

    @property
    def finished(self) -> bool:
        """True once a finish reason is set."""
        return self.finish is not None

    def finish_with(self, reason: FinishReason) -> None:
        """Set the finish reason (first one wins) and wake the waiting handler."""
        if self.finish is None:
            self.finish = reason
            self.finished_at = time.monotonic()
            self.notify.set()

    @property
    def e2e_latency(self) -> float:
        """Seconds from arrival to finish (or to now while running)."""
        end = self.finished_at if self.finished_at is not None else time.monotonic()
        return end - self.created

"""One generation as the sim tracks it: validated input, then live output state.

``GenerateItem`` is what request validation produces (one per batch element);
``SimRequest`` is the mutable record the scheduler advances and the HTTP
handler reads. Handlers wait on ``notify``, an event shared by every item of
one HTTP request, so a batch stream wakes once per scheduler step.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
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

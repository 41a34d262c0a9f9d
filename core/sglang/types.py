"""Typed requests and results of SGLang's native API (what a capture client needs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

FinishKind = Literal["stop", "length", "abort"]


@dataclass(frozen=True)
class SamplingParams:
    """``sampling_params`` of a ``/generate`` request.

    Defaults are the ones a capture wants, not SGLang's: SGLang stops at 128
    tokens and samples at temperature 1.0 when a key is missing, so
    ``max_new_tokens`` is always sent explicitly.
    """

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    stop_token_ids: tuple[int, ...] = ()
    skip_special_tokens: bool = False
    no_stop_trim: bool = True
    sampling_seed: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON object SGLang expects; unset optional keys are left out."""
        body: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "skip_special_tokens": self.skip_special_tokens,
            "no_stop_trim": self.no_stop_trim,
        }
        if self.stop_token_ids:
            body["stop_token_ids"] = list(self.stop_token_ids)
        if self.sampling_seed is not None:
            body["sampling_seed"] = self.sampling_seed
        body.update(self.extra)
        return body


@dataclass(frozen=True)
class GenerateRequest:
    """One pre-tokenized generation: prompt ids, sampling and a request id."""

    input_ids: Sequence[int]
    sampling: SamplingParams
    rid: str | None = None

    def to_json(self, *, stream: bool) -> dict[str, Any]:
        """The ``/generate`` body."""
        body: dict[str, Any] = {
            "input_ids": list(self.input_ids),
            "sampling_params": self.sampling.to_json(),
            "stream": stream,
        }
        if self.rid is not None:
            body["rid"] = self.rid
        return body


class FinishReason(msgspec.Struct, frozen=True, rename={"kind": "type"}):
    """``meta_info.finish_reason`` (decoded as it is: ``kind`` is the JSON's ``type``).

    ``matched`` is the stop token id (int) or stop string (str) for ``stop``;
    ``length`` is max_new_tokens for ``length``; ``message`` and ``status_code``
    describe an ``abort``. Other keys SGLang adds (``err_type``) are ignored.
    """

    kind: FinishKind
    matched: int | str | None = None
    length: int | None = None
    message: str | None = None
    status_code: int | None = None

    @property
    def matched_token(self) -> int | None:
        """The stop token id when a token (not a string) ended generation."""
        return self.matched if isinstance(self.matched, int) else None


@dataclass(frozen=True)
class GenerateResult:
    """A finished generation.

    ``output_ids`` are the raw sampled ids, stop token included.
    ``latency_s`` is measured by the client; ``server_latency_s`` is SGLang's
    ``e2e_latency``. ``meta`` keeps the whole ``meta_info`` for keys this type
    does not name (they vary across SGLang versions).
    """

    rid: str
    output_ids: tuple[int, ...]
    finish: FinishReason
    text: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    latency_s: float = 0.0
    server_latency_s: float | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TokenDelta:
    """New output ids of a streaming request, whichever mode the server streams in.

    ``total`` is how many output ids have arrived so far, this delta included.
    """

    rid: str
    new_ids: tuple[int, ...]
    total: int
    finish: FinishReason | None = None


@dataclass(frozen=True)
class HealthResult:
    """One ``/health`` (or ``/health_generate``) answer: status and latency."""

    status: int
    latency_s: float

    @property
    def healthy(self) -> bool:
        """True when the server answered 200."""
        return self.status == 200


@dataclass(frozen=True)
class ModelInfo:
    """The parts of ``/model_info`` eagle-tui uses; ``raw`` has the rest."""

    model_path: str
    tokenizer_path: str | None
    served_model_name: str | None
    architectures: tuple[str, ...]
    model_type: str | None
    raw: Mapping[str, Any]


@dataclass(frozen=True)
class ServerInfo:
    """The parts of ``/server_info`` eagle-tui uses; ``raw`` has the rest."""

    version: str | None
    context_length: int | None
    max_total_num_tokens: int | None
    tp_size: int | None
    raw: Mapping[str, Any]

"""SGLang JSON bodies to typed results and typed errors.

Reading is lenient: ``meta_info`` keys come and go across SGLang versions
(``total_retractions`` became ``num_retractions``, ``reasoning_tokens`` and
``weight_versions`` appeared), so only ``output_ids`` and ``finish_reason`` are
required and everything else is optional.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from eagle_tui.core.errors import (
    ContextTooLong,
    DuplicateRequestId,
    ProtocolError,
    RequestRejected,
    ServerBusy,
    ServerFault,
    SGLangError,
    Unauthorized,
)
from eagle_tui.core.sglang.types import FinishKind, FinishReason, GenerateResult

_CONTEXT_MESSAGES = (
    "longer than the model's context length",
    "exceeds the model's maximum context length",
    "exceeds the maximum allowed length",
)
_FINISH_KINDS: tuple[FinishKind, ...] = ("stop", "length", "abort")
_INT_ONLY = frozenset({int})


def parse_json(body: bytes, *, url: str) -> Any:
    """Decode a JSON body, or raise ProtocolError quoting the start of what came instead."""
    try:
        return json.loads(body)
    except RecursionError:  # hostile nesting: not a bug of ours, and never retried forever
        raise ProtocolError("server sent JSON nested too deeply to read", url=url) from None
    except ValueError:
        snippet = body[:80].decode("utf-8", "replace")
        raise ProtocolError(f"server sent a body that is not JSON: {snippet!r}", url=url) from None


def parse_finish_reason(raw: Any, *, url: str) -> FinishReason | None:
    """``meta_info.finish_reason``: None while in flight, else one of stop/length/abort."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or raw.get("type") not in _FINISH_KINDS:
        raise ProtocolError(f"unknown finish_reason {raw!r}", url=url)
    kind: FinishKind = raw["type"]
    return FinishReason(
        kind=kind,
        matched=_int_or_str(raw.get("matched")),
        length=_optional_int(raw.get("length")),
        message=_optional_str(raw.get("message")),
        status_code=_optional_int(raw.get("status_code")),
    )


def parse_output_ids(item: Mapping[str, Any], *, url: str) -> tuple[int, ...]:
    """The ``output_ids`` of one response object, checked to be a list of ints."""
    ids = item.get("output_ids")
    if ids is None:
        raise ProtocolError(
            "response has no output_ids (SGLang before 0.5 returns text only; upgrade the server)",
            url=url,
        )
    # The set of the ids' types is built at C speed (a Python loop cost ~60 us per 1,000
    # ids); exact types, so a JSON true or 1.0 is still refused.
    if not isinstance(ids, list) or not {*map(type, ids)} <= _INT_ONLY:
        raise ProtocolError("output_ids is not a list of integers", url=url)
    return tuple(ids)


def parse_result(
    item: Any, *, url: str, latency_s: float, output_ids: tuple[int, ...] | None = None
) -> GenerateResult:
    """A finished ``/generate`` object (or final stream chunk) as a GenerateResult."""
    if not isinstance(item, Mapping) or not isinstance(item.get("meta_info"), Mapping):
        raise ProtocolError("response object has no meta_info", url=url)
    meta: Mapping[str, Any] = item["meta_info"]
    finish = parse_finish_reason(meta.get("finish_reason"), url=url)
    if finish is None:
        raise ProtocolError("final response has no finish_reason", url=url)
    return GenerateResult(
        rid=str(meta.get("id", "")),
        output_ids=parse_output_ids(item, url=url) if output_ids is None else output_ids,
        finish=finish,
        text=_optional_str(item.get("text")),
        prompt_tokens=_optional_int(meta.get("prompt_tokens")),
        completion_tokens=_optional_int(meta.get("completion_tokens")),
        cached_tokens=_optional_int(meta.get("cached_tokens")),
        latency_s=latency_s,
        server_latency_s=_optional_float(meta.get("e2e_latency")),
        meta=meta,
    )


def error_for_status(status: int, body: bytes, *, url: str) -> SGLangError:
    """The typed exception for a non-200 answer, from its status and SGLang's body shapes."""
    message = error_message(body) or f"HTTP {status} with no message"
    if status == 401:
        return Unauthorized(
            f"{message}: the server wants an API key; set EAGLE_TUI_API_KEY "
            "(or capture --api-key-file FILE)",
            url=url,
            status=status,
        )
    if status == 400:
        return rejection(message, url=url)
    if status == 503:
        return ServerBusy(f"server busy or not ready: {message}", url=url, status=status)
    if status >= 500:
        return ServerFault(f"server error {status}: {message}", url=url, status=status)
    return RequestRejected(f"HTTP {status}: {message}", url=url, status=status)


def rejection(message: str, *, url: str, status: int = 400) -> RequestRejected:
    """A 400 refined by its message: context too long and duplicate rid have their own types."""
    if any(text in message for text in _CONTEXT_MESSAGES):
        return ContextTooLong(message, url=url, status=status)
    if "Duplicate request ID" in message:
        return DuplicateRequestId(message, url=url, status=status)
    return RequestRejected(message, url=url, status=status)


def error_message(body: bytes) -> str:
    """The message of any of SGLang's error bodies, or the raw text if it has none."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return body[:200].decode("utf-8", "replace").strip()
    if not isinstance(data, Mapping):
        return str(data)[:200]
    error = data.get("error")
    if isinstance(error, str):
        return error
    if isinstance(error, Mapping) and "message" in error:
        return str(error["message"])
    return str(data.get("message", data))[:200]


def _optional_int(value: Any) -> int | None:
    return value if type(value) is int else None


def _optional_float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _optional_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int_or_str(value: Any) -> int | str | None:
    return value if type(value) is int or isinstance(value, str) else None

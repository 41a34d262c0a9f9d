"""SGLang JSON bodies to typed results and typed errors.

A ``/generate`` answer (and each stream chunk) is decoded straight into ``GenerateBody``
/ ``StreamChunk``: msgspec checks the types while it parses (``output_ids`` must be a list
of exact integers: ``true`` and ``1.0`` are refused), so there is no second pass over the
ids. Reading is tolerant of versions: keys this module does not name are ignored
(``meta_info`` keys come and go across SGLang versions: ``total_retractions`` became
``num_retractions``, ``reasoning_tokens`` and ``weight_versions`` appeared), and only
``output_ids``, ``meta_info`` and (on the final answer) ``finish_reason`` are required.
A named key with a value of the wrong type is a ``ProtocolError`` naming the field.
``meta_info`` is kept raw as well, so ``GenerateResult.meta`` still holds every key.

Error bodies (non-200 answers) are read by hand on purpose: SGLang answers errors in
several shapes and any text is better than a decode error while reporting one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from eagle_tui.core.errors import (
    ConnectionLost,
    ContextTooLong,
    DuplicateRequestId,
    NoWorkerAvailable,
    ProtocolError,
    RequestRejected,
    ServerBusy,
    ServerFault,
    SGLangError,
    Unauthorized,
)
from eagle_tui.core.sglang.types import FinishReason, GenerateResult
from eagle_tui.core.wire import where_what

_CONTEXT_MESSAGES = (
    "longer than the model's context length",
    "exceeds the model's maximum context length",
    "exceeds the maximum allowed length",
)
NO_OUTPUT_IDS = (
    "response has no output_ids (SGLang before 0.5 returns text only; upgrade the server)"
)


class MetaInfo(msgspec.Struct, frozen=True):
    """The ``meta_info`` keys eagle-tui reads (the rest stay in ``GenerateResult.meta``)."""

    id: str = ""
    finish_reason: FinishReason | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    e2e_latency: float | None = None


class GenerateBody(msgspec.Struct, frozen=True):
    """A non-streaming ``/generate`` answer."""

    output_ids: tuple[int, ...]
    meta_info: msgspec.Raw
    text: str | None = None


class StreamChunk(msgspec.Struct, frozen=True):
    """One ``data:`` chunk of a streaming ``/generate``: an answer so far, or an error.

    A missing ``meta_info`` is the empty ``Raw()`` (msgspec takes no ``Raw | None``)."""

    output_ids: tuple[int, ...] | None = None
    meta_info: msgspec.Raw = msgspec.Raw()
    text: str | None = None
    error: Any = msgspec.UNSET


T = TypeVar("T")

_BODY = msgspec.json.Decoder(GenerateBody | list[GenerateBody])
_CHUNK = msgspec.json.Decoder(StreamChunk)
_META = msgspec.json.Decoder(MetaInfo)
_ANY = msgspec.json.Decoder()


def decode_generate(body: bytes, *, url: str, latency_s: float) -> GenerateResult:
    """A non-streaming ``/generate`` answer as a GenerateResult (ProtocolError if it is not
    one). A server given a one-item batch answers with a one-item list; that is accepted."""
    decoded = _decode(_BODY, body, url=url)
    if isinstance(decoded, list):
        if len(decoded) != 1:
            raise ProtocolError(f"expected one response object, got a list of {len(decoded)}",
                                url=url)
        decoded = decoded[0]
    meta = decode_meta(decoded.meta_info, url=url)
    return make_result(decoded.output_ids, meta, decoded.meta_info, decoded.text, url=url,
                       latency_s=latency_s)


def decode_chunk(payload: bytes | str, *, url: str) -> StreamChunk:
    """One stream chunk (ProtocolError if it is not JSON or a field has the wrong type)."""
    return _decode(_CHUNK, payload, url=url, what="stream chunk")


def decode_meta(raw: msgspec.Raw, *, url: str) -> MetaInfo:
    """The typed view of a raw ``meta_info``."""
    return _decode(_META, raw, url=url, root="meta_info")


def make_result(
    output_ids: tuple[int, ...], meta: MetaInfo, raw_meta: msgspec.Raw, text: str | None, *,
    url: str, latency_s: float,
) -> GenerateResult:
    """A finished generation from its decoded parts (ProtocolError without finish_reason)."""
    if meta.finish_reason is None:
        raise ProtocolError("final response has no finish_reason", url=url)
    return GenerateResult(
        rid=meta.id,
        output_ids=output_ids,
        finish=meta.finish_reason,
        text=text,
        prompt_tokens=meta.prompt_tokens,
        completion_tokens=meta.completion_tokens,
        cached_tokens=meta.cached_tokens,
        latency_s=latency_s,
        server_latency_s=meta.e2e_latency,
        meta=parse_json(raw_meta, url=url),
    )


def protocol_error(
    error: msgspec.ValidationError, *, url: str, what: str = "response", root: str = ""
) -> ProtocolError:
    """The ProtocolError for a body whose shape or types are not SGLang's, naming the field."""
    path, problem = where_what(error, root=root)
    if path.startswith(("output_ids", "[0].output_ids")):
        return ProtocolError(f"output_ids is not a list of integers ({problem} at {path})",
                             url=url)
    if "missing required field `output_ids`" in problem:
        return ProtocolError(NO_OUTPUT_IDS, url=url)
    if "missing required field `meta_info`" in problem:
        return ProtocolError(f"{what} object has no meta_info", url=url)
    where = f" at {path}" if path else ""
    return ProtocolError(f"{what} does not fit SGLang's /generate answer: {problem}{where}",
                         url=url)


def _not_json(body: bytes, url: str) -> ProtocolError:
    snippet = body[:80].decode("utf-8", "replace")
    return ProtocolError(f"server sent a body that is not JSON: {snippet!r}", url=url)


def parse_json(body: bytes | msgspec.Raw, *, url: str) -> Any:
    """Decode a JSON body, or raise ProtocolError quoting the start of what came instead."""
    return _decode(_ANY, body, url=url)


def _decode(decoder: msgspec.json.Decoder[T], payload: bytes | str | msgspec.Raw, *, url: str,
            what: str = "response", root: str = "") -> T:
    """``decoder``'s value of ``payload``; ProtocolError when it is not JSON, is nested too
    deeply, or does not fit (naming the field: ``what``, ``root``, see ``protocol_error``)."""
    try:
        return decoder.decode(payload)
    except RecursionError:  # hostile nesting: not a bug of ours (msgspec stops, then raises)
        raise _nested_too_deep(url) from None
    except msgspec.ValidationError as e:
        raise protocol_error(e, url=url, what=what, root=root) from None
    except msgspec.DecodeError:
        data = payload.encode() if isinstance(payload, str) else bytes(payload)
        raise _not_json(data, url) from None


def _nested_too_deep(url: str) -> ProtocolError:
    return ProtocolError("server sent JSON nested too deeply to read", url=url)


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
    code = error_code(body)
    if status >= 500 and code == UPSTREAM_FAILED_CODE:
        return ConnectionLost(f"router lost the worker's connection: {message}", url=url,
                              status=status)
    if status == 503 and code == NO_WORKERS_CODE:
        return NoWorkerAvailable(f"router has no worker to send to: {message}", url=url,
                                 status=status)
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


NO_WORKERS_CODE = "no_available_workers"
"""``error.code`` of SGLang's router (0.3.2) when every worker is unhealthy or circuit-open."""
UPSTREAM_FAILED_CODE = "call_upstream_request_error"
"""``error.code`` (HTTP 500) of the router when the worker it chose dropped or refused the
request (its retries spent): like a connection lost on a server."""


def error_code(body: bytes) -> str | None:
    """``error.code`` of an OpenAI-style error body (the router's), else None."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, Mapping) else None
    code = error.get("code") if isinstance(error, Mapping) else None
    return code if isinstance(code, str) else None


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

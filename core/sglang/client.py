"""One async client per SGLang server, over one shared ``httpx.AsyncClient``; given our own
transport (the capture's ``LeanTransport``), requests go to it straight, with the headers the
client would add, skipping the client's per-request cookie, auth and redirect work.

Every failure becomes a typed exception from ``core.errors`` that says whether
retrying can help. ``finish_reason.type == "abort"`` is raised as
``RequestAborted`` (with the partial result), never returned as a success.
Every body is read with a size limit and every call with a wall-clock limit
(``core.sglang.limits``), so no answer can exhaust memory or hold a caller forever.
"""

from __future__ import annotations

import asyncio
import functools
import os
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx
import msgspec

from eagle_tui.core.errors import (
    ConnectionLost,
    ProtocolError,
    RequestAborted,
    ResponseTooLarge,
    ServerTimeout,
    ServerUnreachable,
    SGLangError,
)
from eagle_tui.core.sglang.limits import (
    ERROR_BODY_PREFIX,
    OTHER_BODY_LIMIT,
    Reply,
    generate_body_limit,
    limited_lines,
    max_output_ids,
    read_limited,
    reply_of,
)
from eagle_tui.core.sglang.stream import DONE, StreamAccumulator, sse_payload
from eagle_tui.core.sglang.types import (
    GenerateRequest,
    GenerateResult,
    HealthResult,
    ModelInfo,
    ServerInfo,
    TokenDelta,
)
from eagle_tui.core.sglang.wire import decode_generate, error_for_status, parse_json, rejection
from eagle_tui.core.urls import ServerURL

API_KEY_ENV = "EAGLE_TUI_API_KEY"

DeltaCallback = Callable[[TokenDelta], None]
JSON_HEADERS = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class ClientTimeouts:
    """Seconds to wait; ``generate`` is the whole-request default, overridable per call."""

    connect: float = 5.0
    health: float = 2.0
    info: float = 10.0
    generate: float = 1800.0


KEEPALIVE_EXPIRY_S = 4.0
"""Idle pooled connections are dropped before SGLang's uvicorn closes them (its keep-alive is
5 s, ``SGLANG_TIMEOUT_KEEP_ALIVE``). httpx's own default is also 5 s: a request sent on a
connection the server is closing at that moment fails with "Server disconnected", which
costs the row an attempt and pauses the server."""


@functools.cache
def default_tls() -> ssl.SSLContext:
    """httpx's default TLS context, built once per process: httpx builds one per client
    otherwise, loading the CA bundle each time (~35 ms, 0.4 s on a loaded host) even for
    http:// URLs, and a dashboard watching 64 servers makes about 200 clients."""
    return httpx.create_ssl_context()


class SGLangClient:
    """Async client for SGLang's native API at ``url`` (e.g. ``http://127.0.0.1:30000``).

    The API key comes from ``api_key`` or the ``EAGLE_TUI_API_KEY`` environment
    variable; it is sent as ``Authorization: Bearer`` and never appears in
    ``repr``, messages or logs. User info of ``url`` reaches httpx only, as Basic auth:
    ``base_url`` (the URL's public text), ``repr`` and every message carry the public form.
    """

    def __init__(
        self,
        url: ServerURL,
        *,
        api_key: str | None = None,
        timeouts: ClientTimeouts | None = None,
        max_connections: int = 512,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url
        self.base_url = url.public
        self.timeouts = timeouts or ClientTimeouts()
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        headers["Accept-Encoding"] = "identity"  # a compressed body could not be bounded
        self._http = httpx.AsyncClient(
            base_url=url.for_requests,
            headers=headers,
            timeout=httpx.Timeout(self.timeouts.info, connect=self.timeouts.connect),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections,
                keepalive_expiry=KEEPALIVE_EXPIRY_S,
            ),
            transport=transport,
            verify=default_tls(),
        )
        self._urls: dict[str, httpx.URL] = {}
        self._timeouts: dict[float, dict[str, float | None]] = {}
        self._direct = transport if _plain_route(self._http.base_url) else None
        """The transport that requests go to straight, past the client's per-request work
        (cookies, auth and redirect hooks, merging defaults: ~13 % of the capture's CPU), when
        nothing of that could apply: our own transport and no user info."""
        self._headers = dict(self._http.headers)
        self._json_headers = self._headers | JSON_HEADERS

    def __repr__(self) -> str:
        return f"SGLangClient({self.base_url!r})"

    async def __aenter__(self) -> SGLangClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    # -- health and info -------------------------------------------------

    async def health(self, *, generate: bool = False, timeout: float | None = None) -> HealthResult:
        """``GET /health`` (or ``/health_generate``): 200 and 503 are answers, not errors."""
        path = "/health_generate" if generate else "/health"
        started = time.monotonic()
        response = await self._request("GET", path, timeout=timeout or self.timeouts.health)
        return HealthResult(status=response.status_code, latency_s=time.monotonic() - started)

    async def model_info(self) -> ModelInfo:
        """``/model_info``, falling back to the older ``/get_model_info``."""
        raw = await self._get_json_with_fallback("/model_info", "/get_model_info")
        return ModelInfo(
            model_path=str(raw.get("model_path", "")),
            tokenizer_path=_str_or_none(raw.get("tokenizer_path")),
            served_model_name=_str_or_none(raw.get("served_model_name")),
            architectures=tuple(str(a) for a in raw.get("architectures") or ()),
            model_type=_str_or_none(raw.get("model_type")),
            raw=raw,
        )

    async def server_info(self) -> ServerInfo:
        """``/server_info``, falling back to the older ``/get_server_info``."""
        raw = await self._get_json_with_fallback("/server_info", "/get_server_info")
        return ServerInfo(
            version=_str_or_none(raw.get("version")),
            context_length=_int_or_none(raw.get("context_length")),
            max_total_num_tokens=_int_or_none(raw.get("max_total_num_tokens")),
            tp_size=_int_or_none(raw.get("tp_size")),
            raw=raw,
        )

    async def metrics(self) -> dict[str, float] | None:
        """Prometheus ``/metrics`` summed per series name; None when the server has none."""
        response = await self._request("GET", "/metrics", timeout=self.timeouts.info)
        if response.status_code == 404:
            return None
        self._raise_for_status(response)
        return parse_prometheus(response.text)

    async def get_raw(self, path: str, *, timeout: float | None = None) -> tuple[int, bytes]:
        """``GET path``: status and body as they came (a router's documents, a worker's
        metrics); transport failures raise like every other call."""
        response = await self._request("GET", path, timeout=timeout or self.timeouts.info)
        return response.status_code, response.content

    async def abort(self, rid: str) -> None:
        """``/abort_request`` for ``rid``.

        Measured on SGLang 0.5.23 (one tokenizer worker): nothing happens unless
        ``rid`` is exactly in flight; when it is, the scheduler aborts every rid
        that STARTS WITH it. Capture rids are fixed-width so one never prefixes another.
        """
        if not rid:
            raise ValueError("an empty rid aborts nothing; use abort_all()")
        await self._post_abort({"rid": rid})

    async def abort_all(self) -> None:
        """Abort every request in flight on the server."""
        await self._post_abort({"abort_all": True})

    # -- generation ------------------------------------------------------

    async def generate(
        self, request: GenerateRequest, *, timeout: float | None = None
    ) -> GenerateResult:
        """Non-streaming ``/generate`` of one prompt."""
        started = time.monotonic()
        body = request.to_json(stream=False)
        limit = generate_body_limit(request.sampling.max_new_tokens)
        response = await self._request(
            "POST", "/generate", json=body, timeout=timeout or self.timeouts.generate,
            limit=limit,
        )
        self._raise_for_status(response)
        result = decode_generate(
            response.content, url=self._url("/generate"), latency_s=time.monotonic() - started
        )
        _check_id_count(len(result.output_ids), request, self._url("/generate"))
        return self._check_abort(result)

    async def generate_streaming(
        self,
        request: GenerateRequest,
        on_delta: DeltaCallback | None = None,
        *,
        timeout: float | None = None,
    ) -> GenerateResult:
        """Streaming ``/generate``; ``on_delta`` gets the new ids of every chunk.

        Works with cumulative and incremental servers alike; the final ids are
        the same as a non-streaming call's.
        """
        started = time.monotonic()
        url = self._url("/generate")
        accumulator = StreamAccumulator(url=url)
        timeout = timeout or self.timeouts.generate
        async with _wall_clock(timeout, url), self._stream(request, timeout) as lines:
            async for line in lines:
                payload = sse_payload(line)
                if payload is None:
                    continue
                if payload == DONE:
                    break
                delta = accumulator.feed(payload)
                _check_id_count(len(accumulator.output_ids), request, url)
                if on_delta is not None and delta.new_ids:
                    on_delta(delta)
            else:
                raise ConnectionLost("stream ended without data: [DONE]", url=url)
        result = accumulator.result(latency_s=time.monotonic() - started)
        return self._check_abort(result)

    # -- plumbing --------------------------------------------------------

    @asynccontextmanager
    async def _stream(self, request: GenerateRequest, timeout: float) -> AsyncIterator[Any]:
        url = self._url("/generate")
        http_request = self._build("POST", "/generate", request.to_json(stream=True), timeout)
        try:
            response = await self._send(http_request)
        except httpx.HTTPError as exc:
            raise _transport_error(exc, url) from exc
        try:
            if response.status_code != 200:
                prefix = await _guarded(
                    read_limited(response, ERROR_BODY_PREFIX, url=url, truncate=True), url)
                self._raise_for_status(reply_of(response, prefix))
            limit = generate_body_limit(request.sampling.max_new_tokens)
            yield _guarded_lines(response, url, limit)
        finally:
            await response.aclose()

    async def _request(
        self, method: str, path: str, *, timeout: float, json: Any = None,
        limit: int = OTHER_BODY_LIMIT,
    ) -> Reply:
        """One request, its body read within ``limit`` bytes and ``timeout`` seconds."""
        url = self._url(path)
        request = self._build(method, path, json, timeout)
        try:
            async with asyncio.timeout(timeout):  # httpx's timeouts are per read
                response = await self._send(request)
                try:
                    if response.status_code == 200:
                        body = await read_limited(response, limit, url=url)
                    else:
                        body = await read_limited(response, ERROR_BODY_PREFIX, url=url,
                                                  truncate=True)
                finally:
                    await response.aclose()
        except httpx.HTTPError as exc:
            raise _transport_error(exc, url) from exc
        except TimeoutError:
            raise ServerTimeout(f"no complete answer within {timeout:g} s", url=url) from None
        return reply_of(response, body)

    def _build(self, method: str, path: str, json: Any, timeout: float) -> httpx.Request:
        """``build_request`` with what every call would otherwise rebuild made once: the
        URL merged with the base, the timeouts, and the body encoded by msgspec (a
        ``/generate`` body of a few thousand ids costs the standard library ~10x more)."""
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = self._http.build_request(method, path).url
        timeouts = self._timeouts.get(timeout)
        if timeouts is None:
            if len(self._timeouts) > 16:  # callers that pass ever-changing timeouts
                self._timeouts.clear()
            timeouts = self._timeouts[timeout] = httpx.Timeout(timeout).as_dict()
        extensions = {"timeout": timeouts}
        if self._direct is not None:  # the headers the client would have merged in
            if json is None:
                return httpx.Request(method, url, headers=self._headers, extensions=extensions)
            return httpx.Request(method, url, content=msgspec.json.encode(json),
                                 headers=self._json_headers, extensions=extensions)
        if json is None:
            return self._http.build_request(method, url, extensions=extensions)
        return self._http.build_request(method, url, content=msgspec.json.encode(json),
                                        headers=JSON_HEADERS, extensions=extensions)

    async def _send(self, request: httpx.Request) -> httpx.Response:
        """``request`` sent, its body not read yet."""
        if self._direct is None:
            return await self._http.send(request, stream=True)
        response = await self._direct.handle_async_request(request)
        response.request = request
        return response

    async def _get_json_with_fallback(self, path: str, old_path: str) -> Mapping[str, Any]:
        response = await self._request("GET", path, timeout=self.timeouts.info)
        if response.status_code == 404:
            path = old_path
            response = await self._request("GET", path, timeout=self.timeouts.info)
        self._raise_for_status(response)
        data = parse_json(response.content, url=self._url(path))
        if not isinstance(data, Mapping):
            raise ProtocolError(f"{path} did not return a JSON object", url=self._url(path))
        return data

    async def _post_abort(self, body: dict[str, Any]) -> None:
        response = await self._request(
            "POST", "/abort_request", json=body, timeout=self.timeouts.info
        )
        self._raise_for_status(response)

    def _raise_for_status(self, reply: Reply) -> None:
        if reply.status_code != 200:
            raise error_for_status(reply.status_code, reply.content, url=self._url(reply.path))

    def _check_abort(self, result: GenerateResult) -> GenerateResult:
        finish = result.finish
        if finish.kind != "abort":
            return result
        url = self._url("/generate")
        message = finish.message or "aborted"
        if finish.status_code == 400:
            raise rejection(f"aborted by the scheduler: {message}", url=url)
        raise RequestAborted(
            f"request {result.rid} aborted: {message}",
            partial=result,
            url=url,
            status=finish.status_code,
        )

    def _url(self, path: str) -> str:
        return f"{self.base_url}{path}"


def _plain_route(base_url: httpx.URL) -> bool:
    """Whether ``httpx.AsyncClient`` would add nothing per request to one to ``base_url``
    beyond its default headers: no user info in the URL (it would add Basic auth). A client
    given its own transport mounts no proxy from the environment, so none can apply."""
    return not base_url.userinfo


async def _guarded_lines(response: httpx.Response, url: str, limit: int) -> (
    AsyncIterator[str]
):
    """The response's lines (each within ``limit`` bytes), with transport failures
    mid-stream turned into typed errors."""
    try:
        async for line in limited_lines(response, limit, url=url):
            yield line
    except httpx.HTTPError as exc:
        raise _transport_error(exc, url) from exc


async def _guarded(reading: Awaitable[bytes], url: str) -> bytes:
    """``reading``, with transport failures turned into typed errors."""
    try:
        return await reading
    except httpx.HTTPError as exc:
        raise _transport_error(exc, url) from exc


@asynccontextmanager
async def _wall_clock(seconds: float, url: str) -> AsyncIterator[None]:
    """At most ``seconds`` in total (httpx's timeouts are per read: a trickle never ends)."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        raise ServerTimeout(f"no complete answer within {seconds:g} s", url=url) from None


def _check_id_count(count: int, request: GenerateRequest, url: str) -> None:
    """Refuse a result with far more output ids than were asked for."""
    asked = request.sampling.max_new_tokens
    if count > max_output_ids(asked):
        raise ResponseTooLarge(
            f"the server sent {count:,} output ids for max_new_tokens={asked} (limit "
            f"{max_output_ids(asked):,}); abandoned as broken", url=url)


def _transport_error(exc: httpx.HTTPError, url: str) -> SGLangError:
    """Map httpx's transport exceptions onto the error tree."""
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return ServerTimeout(f"timed out ({detail})", url=url)
    if isinstance(exc, httpx.ConnectError):
        return ServerUnreachable(f"cannot connect ({detail}); is the server up?", url=url)
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return ConnectionLost(f"connection dropped ({detail}); did the server crash?", url=url)
    return ConnectionLost(f"transport failure ({detail})", url=url)


def parse_prometheus(text: str) -> dict[str, float]:
    """Sum the samples of each series name (labels dropped) in Prometheus text format."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_part, _, value = line.rpartition(" ")
        name = name_part.split("{", 1)[0].strip()
        try:
            totals[name] = totals.get(name, 0.0) + float(value)
        except ValueError:
            continue
    return totals


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int_or_none(value: Any) -> int | None:
    return value if type(value) is int else None


__all__ = ["API_KEY_ENV", "ClientTimeouts", "SGLangClient", "parse_prometheus"]

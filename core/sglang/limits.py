"""How much a server may send back, and reading a body without ever holding more.

A ``/generate`` answer for ``max_new_tokens`` ids is small: about 7 bytes per id, the decoded
text, and ``meta_info``. A server that sends gigabytes (a broken proxy, a hostile peer, a
gzip bomb, an endless stream) must cost the capture a failed row, not its memory. So:

- every body is read in chunks and abandoned as soon as it passes its limit: for
  ``/generate`` :func:`generate_body_limit` (1 MiB plus 512 bytes per requested token, about
  ten times what real SGLang sends), for everything else (health, info, metrics, abort)
  :data:`OTHER_BODY_LIMIT`; an error answer is read only as far as :data:`ERROR_BODY_PREFIX`
  (its message is at the start);
- a declared ``Content-Length`` over the limit is refused before reading;
- the client asks for ``Accept-Encoding: identity``; a gzip or deflate body sent anyway is
  decompressed here with the limit applied to the *decompressed* size (httpx would inflate
  it whole), any other encoding is refused;
- a streamed line (one SSE event) may not exceed the ``/generate`` limit, and a result may
  not carry more than :func:`max_output_ids` ids (more than that is not a long answer but a
  broken server; a little more than ``max_new_tokens`` is stored and flagged instead, see
  ``core.validate``).

Over a limit the request is abandoned (the connection closed, which makes SGLang abort it)
and :class:`ResponseTooLarge` says which limit and why; retrying will not help.
"""

from __future__ import annotations

import codecs
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx

from eagle_tui.core.errors import ProtocolError, ResponseTooLarge

BASE_BODY_BYTES = 1 << 20
BYTES_PER_TOKEN = 512
OTHER_BODY_LIMIT = 8 << 20
ERROR_BODY_PREFIX = 64 << 10


def generate_body_limit(max_new_tokens: int) -> int:
    """Most bytes a ``/generate`` answer for ``max_new_tokens`` may have."""
    return BASE_BODY_BYTES + BYTES_PER_TOKEN * max(0, max_new_tokens)


def max_output_ids(max_new_tokens: int) -> int:
    """Most output ids a result may carry before it is refused as broken (not flagged)."""
    return 2 * max(0, max_new_tokens) + 64


def mib(size: int) -> str:
    """``3.0 MiB``."""
    return f"{size / (1 << 20):.1f} MiB"


async def read_limited(response: httpx.Response, limit: int, *, url: str,
                       truncate: bool = False) -> bytes:
    """The (decoded) body of a streamed ``response``, at most ``limit`` bytes.

    Over the limit: ResponseTooLarge, or with ``truncate`` the first ``limit`` bytes.
    """
    declared = response.headers.get("content-length", "")
    if not truncate and declared.isdigit() and int(declared) > limit:
        raise ResponseTooLarge(f"the server announced a {mib(int(declared))} body, over the "
                               f"{mib(limit)} limit; not read", url=url)
    parts: list[bytes] = []
    size = 0
    plain = not response.is_stream_consumed and response.headers.get(
        "content-encoding", "identity").strip().lower() in ("", "identity")
    chunks = response.aiter_raw() if plain else decoded_chunks(response, limit, url=url)
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            if truncate:
                parts.append(chunk[: len(chunk) - (size - limit)])
                break
            raise ResponseTooLarge(f"response body over the {mib(limit)} limit; abandoned",
                                   url=url)
        parts.append(chunk)
    return b"".join(parts)


async def limited_lines(response: httpx.Response, limit: int, *, url: str) -> AsyncIterator[str]:
    """The lines of a streamed body (``\\n``, ``\\r\\n`` or ``\\r`` ends one), each at most
    ``limit`` bytes, decoded as UTF-8 (invalid bytes replaced)."""
    pending = b""
    async for chunk in decoded_chunks(response, limit, url=url):
        pending += chunk
        *lines, pending = pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        for line in lines:
            yield line.decode("utf-8", "replace")
        if len(pending) > limit:
            raise ResponseTooLarge(f"a stream line over the {mib(limit)} limit; abandoned",
                                   url=url)
    if pending:
        yield pending.decode("utf-8", "replace")


async def decoded_chunks(response: httpx.Response, limit: int, *, url: str) -> (
    AsyncIterator[bytes]
):
    """The body's bytes after content decoding, each chunk at most ``limit + 1`` bytes."""
    if response.is_stream_consumed:  # built in memory (a test transport): already decoded
        yield response.content
        return
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        async for raw in response.aiter_raw():
            yield raw
        return
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise ResponseTooLarge(f"the server sent a body encoded as {encoding!r} although "
                               "asked for identity; not read", url=url)
    decoder = zlib.decompressobj(31 if "gzip" in encoding else 15)
    try:
        async for raw in response.aiter_raw():
            data = raw
            while data and not decoder.eof:
                out = decoder.decompress(data, limit + 1)
                data = decoder.unconsumed_tail
                if out:
                    yield out
    except zlib.error as e:
        raise ProtocolError(f"the {encoding} body is corrupt ({e})", url=url) from None


@dataclass(frozen=True, slots=True)
class Reply:
    """A response read to its end (within a limit): the parts callers use. Our own type,
    so nothing writes into httpx's private fields to hand a checked body on."""

    status_code: int
    content: bytes
    path: str
    charset: str | None = None

    @property
    def text(self) -> str:
        return self.content.decode(self.charset or "utf-8", "replace")


def reply_of(response: httpx.Response, body: bytes) -> Reply:
    """``response``'s status with ``body``, read and decoded here within a limit. A charset
    Python does not know is dropped (UTF-8 instead), as httpx's own ``.text`` does."""
    return Reply(response.status_code, body, response.request.url.path,
                 _known_charset(response.charset_encoding))


def _known_charset(name: str | None) -> str | None:
    if name is None:
        return None
    try:
        codecs.lookup(name)
    except LookupError:
        return None
    return name

"""A hostile "SGLang" server for tests: a real process on raw asyncio sockets.

``python hostile_server.py MODE`` listens on a free port, prints ``READY <port>`` and answers
``/health``, ``/model_info``, ``/server_info`` and ``/abort_request`` politely. ``/generate``
gets the hostile answer of MODE:

    oversized     200, no Content-Length, JSON that never ends (``[1,1,1,...`` for 5 GB)
    announced     200 with ``Content-Length: 5000000000`` and then that body
    gzip_bomb     200, ``Content-Encoding: gzip`` although asked for identity: ~5 GB of
                  JSON inflating from a few MB
    endless_sse   ``text/event-stream``, one ``data:`` event with one more id every few ms,
                  forever (also to non-streaming requests)
    endless_line  ``text/event-stream`` whose first line never ends
    huge_ids      a well-formed answer with 5,000,002 output ids (~35 MB)
    nested        a ``meta_info`` value ``[[[[...]]]]`` 100,000 deep
    nested_top    the whole body ``[[[[...]]]]`` 100,000 deep
    long_ok       a well-formed answer with max_new_tokens + 6 ids (stored, flagged)

It stops when its parent closes its stdin (or on SIGTERM).
"""

from __future__ import annotations

import asyncio
import json
import sys
import zlib

CHUNK = 1 << 16
HUGE = 5_000_000_000


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, mode: str) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in
                       (line.partition(":") for line in lines[1:] if line)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if path == "/generate" and method == "POST":
                await generate(writer, mode, json.loads(body))
                return  # hostile answers end the connection
            await polite(writer, path)
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def polite(writer: asyncio.StreamWriter, path: str) -> None:
    if path in ("/health", "/health_generate"):
        await send(writer, 200, b"")
    elif path in ("/model_info", "/get_model_info"):
        await send(writer, 200, json.dumps({"model_path": "hostile"}).encode())
    elif path in ("/server_info", "/get_server_info"):
        await send(writer, 200, json.dumps({"version": "0.0-hostile"}).encode())
    elif path == "/abort_request":
        await send(writer, 200, b"")
    else:
        await send(writer, 404, b'{"error": "not found"}')


async def send(writer: asyncio.StreamWriter, status: int, body: bytes,
               content_type: str = "application/json", *, close: bool = False) -> None:
    """One response; ``close`` says the connection ends after it (as HTTP requires: a client
    that was not told could reuse the connection while it closes, and fail that request)."""
    ending = "connection: close\r\n" if close else ""
    writer.write(f"HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\n{ending}"
                 f"content-length: {len(body)}\r\n\r\n".encode() + body)
    await writer.drain()


def answer(ids: list[int] | str, max_new_tokens: int) -> bytes:
    """A well-formed /generate body around ``ids`` (a list, or its JSON text)."""
    ids_json = ids if isinstance(ids, str) else json.dumps(ids)
    count = ids_json.count(",") + 1 if isinstance(ids, str) else len(ids)
    meta = {"id": "r", "finish_reason": {"type": "length", "length": max_new_tokens},
            "prompt_tokens": 0, "completion_tokens": count}
    return (b'{"text": "", "output_ids": ' + ids_json.encode() + b', "meta_info": '
            + json.dumps(meta).encode() + b"}")


async def generate(writer: asyncio.StreamWriter, mode: str, request: dict[str, object]) -> None:
    sampling = request.get("sampling_params")
    max_new = int(sampling.get("max_new_tokens", 16)) if isinstance(sampling, dict) else 16
    if mode == "huge_ids":
        await send(writer, 200, answer(",".join(["1"] * 5_000_002).join("[]"), max_new),
                   close=True)
    elif mode == "long_ok":
        await send(writer, 200, answer([1] * (max_new + 6), max_new), close=True)
    elif mode == "nested":
        deep = b"[" * 100_000 + b"]" * 100_000
        await send(writer, 200, b'{"output_ids": [1], "meta_info": {"deep": ' + deep + b"}}",
                   close=True)
    elif mode == "nested_top":
        await send(writer, 200, b"[" * 100_000 + b"]" * 100_000, close=True)
    elif mode == "oversized":
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                     b"connection: close\r\n\r\n" + b'{"output_ids": [')
        await stream_forever(writer, b"1," * (CHUNK // 2))
    elif mode == "announced":
        writer.write(f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close"
                     f"\r\ncontent-length: {HUGE}\r\n\r\n".encode() + b'{"output_ids": [')
        await stream_forever(writer, b"1," * (CHUNK // 2))
    elif mode == "gzip_bomb":
        await gzip_bomb(writer)
    elif mode == "endless_sse":
        await endless_sse(writer)
    elif mode == "endless_line":
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"connection: close\r\n\r\ndata: ")
        await stream_forever(writer, b"x" * CHUNK)
    else:
        raise SystemExit(f"unknown mode {mode}")


async def stream_forever(writer: asyncio.StreamWriter, chunk: bytes, limit: int = HUGE) -> None:
    sent = 0
    while sent < limit:
        writer.write(chunk)
        await writer.drain()
        sent += len(chunk)


async def gzip_bomb(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                 b"content-encoding: gzip\r\nconnection: close\r\n\r\n")
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    writer.write(packer.compress(b'{"output_ids": ['))
    block = b"0," * (1 << 20)  # 2 MiB inflated per block, a few KB compressed
    for _ in range(HUGE // len(block)):
        out = packer.compress(block)
        if out:
            writer.write(out)
            await writer.drain()


async def endless_sse(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                 b"connection: close\r\n\r\n")
    count = 0
    while True:
        count += 1
        chunk = {"text": "x", "output_ids": [1], "meta_info": {
            "id": "r", "finish_reason": None, "completion_tokens": count}}
        writer.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await writer.drain()
        if count % 64 == 0:
            await asyncio.sleep(0.001)


async def main(mode: str) -> None:
    server = await asyncio.start_server(lambda r, w: handle(r, w, mode), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"READY {port}", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes it
    server.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))

"""The control API over a real Unix socket, around a fake engine: commands, garbage,
permissions and peer credentials, and bounded event queues for clients that stop reading."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import msgspec
import pytest
from batch_helpers import FakeEngine, raw_exchange, serve_fake

from eagle_tui.core.batches.api import (
    End,
    ErrorReply,
    ProgressEvent,
    StateReply,
    StatusDoc,
    Unrecognized,
    WatchReply,
)
from eagle_tui.core.batches.control_client import BatchClient
from eagle_tui.core.batches.control_server import ControlServer
from eagle_tui.core.batches.events import SSEDecoder
from eagle_tui.core.batches.hub import EventHub
from eagle_tui.core.batchstate import BatchState
from eagle_tui.core.capture.events import CaptureEvent, DeltaEvent, RequestEvent
from eagle_tui.core.capture.progress import ProgressTracker
from eagle_tui.core.clock import SystemClock
from eagle_tui.core.errors import BatchError, ControlRejected, WorkerUnreachable

Served = tuple[ControlServer, FakeEngine, EventHub]


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    server, engine, hub = await serve_fake(tmp_path / "batch")
    yield server, engine, hub
    await server.close(End(state=BatchState.STOPPED))


async def test_commands_reach_the_engine_and_status_answers(served: Served) -> None:
    server, engine, _ = served
    async with BatchClient(server.socket_path) as client:
        assert (await client.pause()) == StateReply(state=BatchState.PAUSED)
        assert (await client.resume()) == StateReply(state=BatchState.RUNNING)
        assert (await client.watch(3)) == WatchReply(requested=3, started=0)
        assert (await client.stop(5, abort=False)) == StateReply(state=BatchState.STOPPING)
        await client.stop(abort=True)
        status = await client.status()
    assert engine.calls == [("pause",), ("resume",), ("watch", 3), ("stop", 5.0, False),
                            ("stop", None, True)]
    assert status.state == "stopping" and status.batch.id == "test-batch"
    transport = httpx.AsyncHTTPTransport(uds=str(server.socket_path))
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as raw:
        document = (await raw.get("/status")).json()  # every key is on the wire
    assert set(document) >= {"progress", "servers", "errors", "recent_errors", "shards",
                             "watch", "events", "manifest"}
    assert msgspec.convert(document, StatusDoc).batch == status.batch


GARBAGE = [
    (b"\x00\xff\xfe not http at all\r\n\r\n", 400),
    (b"GET /status HTTP/1.1\r\nHost: x\r\nContent-Length: banana\r\n\r\n", 400),
    (b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", 404),
    (b"GET /pause HTTP/1.1\r\nHost: x\r\n\r\n", 405),
    (b"DELETE /status HTTP/1.1\r\nHost: x\r\n\r\n", 405),
    (b"POST /stop HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\nnot json", 400),
    (b"POST /stop HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n\xff\xfe", 400),
    (b'POST /stop HTTP/1.1\r\nHost: x\r\nContent-Length: 18\r\n\r\n{"grace_s":"soon"}', 400),
    (b'POST /stop HTTP/1.1\r\nHost: x\r\nContent-Length: 14\r\n\r\n{"grace_s":-1}', 400),
    (b'POST /stop HTTP/1.1\r\nHost: x\r\nContent-Length: 15\r\n\r\n{"abort":"yes"}', 400),
    (b'POST /watch HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n{"count":0}', 400),
    (b'POST /watch HTTP/1.1\r\nHost: x\r\nContent-Length: 14\r\n\r\n{"count":true}', 400),
    (b"POST /watch HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n[1]", 400),
    (b'POST /pause HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\n{"x":1}', 400),
    (b"POST /watch HTTP/1.1\r\nHost: x\r\nContent-Length: 9999999\r\n\r\n{", 413),
    (b"POST /watch HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n" + b"[" * 20000, 413),
    (b"POST /watch HTTP/1.1\r\nHost: x\r\nContent-Length: 9000\r\n\r\n" + b"[" * 9000, 400),
]


@pytest.mark.parametrize(("request_bytes", "expected"), GARBAGE)
async def test_garbage_gets_a_4xx_and_the_worker_carries_on(
    served: Served, request_bytes: bytes, expected: int
) -> None:
    server, engine, _ = served
    answer = await raw_exchange(server.socket_path, request_bytes)
    assert answer.split(b"\r\n", 1)[0].split(b" ")[1] == str(expected).encode(), answer[:200]
    async with BatchClient(server.socket_path) as client:
        assert (await client.status()).state == "running"
    assert engine.calls == []


WRONG_TYPES = [
    ("/stop", b'{"grace_s":"soon"}', "POST /stop: grace_s: Expected `float | null`, got `str`",
     "grace_s must be a number of seconds in [0, 604800], abort true or false"),
    ("/stop", b'{"grace_s":1e9}', "grace_s: Expected `float` <= 604800.0", "grace_s must be"),
    ("/stop", b'{"abort":"yes"}', "abort: Expected `bool`, got `str`", "abort true or false"),
    ("/watch", b'{"count":true}', "count: Expected `int`, got `bool`",
     "count must be an integer in [1, 100000]"),
    ("/watch", b'{"count":2.5}', "count: Expected `int`, got `float`", "count must be"),
    ("/watch", b"{}", "Object missing required field `count`", "count must be"),
    ("/watch", b'{"count":1,"cuont":2}', "unknown field `cuont`", "count must be"),
    ("/pause", b'{"x":1}', "POST /pause: Object contains unknown field `x`",
     "send no body or {}"),
    ("/resume", b"[]", "Expected `object`, got `array`", "send no body or {}"),
]


@pytest.mark.parametrize(("path", "body", "problem", "usage"), WRONG_TYPES)
async def test_a_request_of_the_wrong_shape_is_a_400_saying_what_where_and_what_to_send(
    served: Served, path: str, body: bytes, problem: str, usage: str
) -> None:
    server, engine, _ = served
    request = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
               "Connection: close\r\n\r\n").encode() + body
    answer = await raw_exchange(server.socket_path, request)
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), answer[:200]
    error = msgspec.json.decode(payload, type=ErrorReply).error
    assert problem in error and usage in error, error
    assert engine.calls == []


async def test_client_reports_a_refusal_with_the_reason(served: Served) -> None:
    server, _, _ = served
    async with BatchClient(server.socket_path) as client:
        with pytest.raises(ControlRejected, match="count must be an integer") as caught:
            await client.watch(0)
    assert caught.value.status == 400


async def test_socket_is_private_to_its_owner(served: Served) -> None:
    server, _, _ = served
    info = server.socket_path.lstat()
    assert stat.S_ISSOCK(info.st_mode) and info.st_uid == os.getuid()
    assert stat.S_IMODE(info.st_mode) == 0o600


async def test_a_peer_with_another_uid_is_refused(tmp_path: Path) -> None:
    # The server believes it belongs to another uid, so our own connection is "foreign".
    server, engine, _ = await serve_fake(tmp_path / "batch", allowed_uid=os.getuid() + 1)
    try:
        async with BatchClient(server.socket_path) as client:
            with pytest.raises(ControlRejected) as caught:
                await client.stop(abort=True)
        assert caught.value.status == 403
        answer = await raw_exchange(server.socket_path, b"GET /status HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 403")
    finally:
        await server.close(End(state=BatchState.STOPPED))
    assert engine.calls == []


_INTRUDER = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except PermissionError:
    print("EACCES")
    raise SystemExit(0)
s.settimeout(10)  # the refusal comes as soon as the connection is accepted
print(s.recv(65536).split(b"\\r\\n")[0].decode())
"""


@pytest.mark.skipif(os.getuid() != 0 or not Path("/usr/bin/python3").exists(),
                    reason="needs root to run a process as another user")
@pytest.mark.slow
async def test_another_users_process_cannot_control_the_batch() -> None:
    # Not under tmp_path: pytest's base temp dir is 0700, which would stop the other user
    # before the socket's own mode is ever tested.
    base = Path(tempfile.mkdtemp(prefix="eagle-perm-"))
    try:
        base.chmod(0o755)
        server, engine, _ = await serve_fake(base / "batch")
        (base / "batch").chmod(0o755)
        try:
            assert await _as_nobody(server.socket_path) == "EACCES"  # mode 0600 stops it
            server.socket_path.chmod(0o666)  # a socket left with loose permissions
            assert await _as_nobody(server.socket_path) == "HTTP/1.1 403 Forbidden"
        finally:
            await server.close(End(state=BatchState.STOPPED))
        assert engine.calls == []
    finally:
        shutil.rmtree(base)


async def _as_nobody(socket_path: Path) -> str:
    process = await asyncio.create_subprocess_exec(
        "/usr/bin/python3", "-c", _INTRUDER, str(socket_path), user=65534, group=65534,
        extra_groups=[], stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        cwd="/")
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    return out.decode().strip()


def _delta(i: int) -> CaptureEvent:
    return DeltaEvent(sample_id=f"s{i}", rid=f"r{i}", new_ids=tuple(range(40)), total=40,
                      at=0.0)


async def test_a_client_that_never_reads_costs_bounded_memory(tmp_path: Path) -> None:
    server, _, hub = await serve_fake(tmp_path / "batch", max_queued=64)
    snapshot = ProgressTracker(SystemClock()).snapshot()
    reader, writer = await asyncio.open_unix_connection(str(server.socket_path))
    try:
        writer.write(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        async with BatchClient(server.socket_path) as client:
            while not (await client.status()).events.clients:
                await asyncio.sleep(0)  # yield until the server has subscribed it
            for i in range(20_000):  # ~4 MB of events against a 64-event queue
                hub.publish(_delta(i))
                hub.publish_progress(ProgressEvent.of(snapshot, float(i)))
                if i % 500 == 0:
                    await asyncio.sleep(0)  # let the server write until the socket is full
            stats = (await client.status()).events.clients
        assert len(stats) == 1
        assert stats[0].queued <= 64 and stats[0].dropped > 10_000
        text = await _read_some_events(reader)
        assert "event: lost" in text  # the client learns it missed events
    finally:
        writer.close()
        await writer.wait_closed()
        await server.close(End(state=BatchState.STOPPED))


async def _read_some_events(reader: asyncio.StreamReader) -> str:
    """Drain what the server had buffered, then until a ``lost`` event appears."""
    seen = ""
    async with asyncio.timeout(20):
        while "event: lost" not in seen:
            chunk = await reader.read(1 << 20)
            if not chunk:
                break
            seen += chunk.decode(errors="replace")
    return seen


async def test_close_ends_every_event_stream_and_removes_the_socket(tmp_path: Path) -> None:
    server, _, hub = await serve_fake(tmp_path / "batch")
    async with BatchClient(server.socket_path) as client:
        events = client.events(reconnect_s=0)
        hello = await anext(events)
        hub.publish(RequestEvent(kind="sent", sample_id="s1", at=1.0, rid="r1", watched=True))
        closing = asyncio.create_task(server.close(End(state=BatchState.DONE, exit_code=0)))
        rest = [e async for e in events]
        await closing
    assert hello.type == "hello" and hello.data.state == "running"
    assert [e.type for e in rest] == ["request", "end"]
    assert rest[0].data.watched is True and rest[1].data.state == "done"  # type: ignore[union-attr]
    assert not server.socket_path.exists()
    with pytest.raises(WorkerUnreachable, match="not running"):
        async with BatchClient(server.socket_path) as client:
            await client.status()


def test_sse_decoder_reads_what_the_server_writes() -> None:
    decoder = SSEDecoder()
    body = '{"sample_id": "s", "rid": "r", "new_ids": [163607], "total": 1, "at": 2.5}'
    lines = ": keep-alive", "", "event: delta", "id: 7", f"data: {body}", ""
    events = [e for e in (decoder.feed(line) for line in lines) if e is not None]
    assert len(events) == 1
    assert events[0].type == "delta" and events[0].seq == 7
    assert events[0].data == DeltaEvent(sample_id="s", rid="r", new_ids=(163607,), total=1,
                                        at=2.5)


def test_sse_decoder_refuses_a_body_that_does_not_fit_and_passes_unknown_types() -> None:
    decoder = SSEDecoder()
    for line in ("event: delta", 'data: {"sample_id": "s", "rid": "r", "new_ids": [1, "2"], '
                 '"total": 2, "at": 0}'):
        decoder.feed(line)
    with pytest.raises(BatchError, match=r"'delta' event.*new_ids\[1\]: Expected `int`"):
        decoder.feed("")
    for line in ("event: end", 'data: {"state": "zombie"}'):
        decoder.feed(line)
    with pytest.raises(BatchError, match=r"state: Invalid enum value 'zombie'"):
        decoder.feed("")
    for line in ("event: future", 'data: {"x": 1}'):
        decoder.feed(line)
    assert decoder.feed("") is not None  # a newer worker's event type is passed on as is
    decoder.feed("event: future")
    decoder.feed('data: {"x": 1}')
    event = decoder.feed("")
    assert event is not None and event.data == Unrecognized(data='{"x": 1}')

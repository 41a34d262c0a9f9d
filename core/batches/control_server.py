"""Serving a worker's control API on its Unix socket, in the worker's own event loop.

``ControlServer.start`` binds the socket privately (``sockpath.bind_private_socket``: mode
0600 before ``listen``) and serves the ``ControlApi`` app with uvicorn over HTTP/1.1. Every
accepted connection's peer uid is checked (``SO_PEERCRED``); a connection from another uid
gets ``403`` and is closed before any request is read. A ticker publishes a coalesced
progress snapshot at most ``PROGRESS_HZ`` times a second, and only while someone listens.

uvicorn's ``serve()`` would install its own SIGINT/SIGTERM handlers; the worker handles
those itself (draining the batch), so this drives ``startup``/``main_loop``/``shutdown``
directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from pathlib import Path

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from eagle_tui.core.batches.api import End, ErrorReply, ProgressEvent
from eagle_tui.core.batches.control_app import ControlApi, Controllable
from eagle_tui.core.batches.events import PROGRESS_HZ
from eagle_tui.core.batches.hub import EventHub
from eagle_tui.core.batches.sockpath import bind_private_socket, peer_uid
from eagle_tui.core.wire import ENCODER

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 2.0


def _forbidden() -> bytes:
    body = ENCODER.encode(ErrorReply(error="this batch belongs to another user"))
    head = (b"HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\n"
            b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n")
    return head + body


def peer_checked_protocol(allowed_uid: int) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, refusing connections whose peer uid is not ``allowed_uid``."""

    class PeerCheckedH11(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            sock = transport.get_extra_info("socket")
            uid = peer_uid(sock) if sock is not None else None
            if uid is not None and uid != allowed_uid:
                log.warning("refused a control connection from uid %d (only uid %d may "
                            "control this batch)", uid, allowed_uid)
                transport.write(_forbidden())
                transport.close()

    return PeerCheckedH11


class ControlServer:
    """The control endpoint of one worker."""

    def __init__(self, api: ControlApi, engine: Controllable, hub: EventHub,
                 socket_path: Path, *, allowed_uid: int | None = None,
                 progress_hz: float = PROGRESS_HZ) -> None:
        self.socket_path = socket_path
        self._api = api
        self._engine = engine
        self._hub = hub
        self._allowed_uid = os.getuid() if allowed_uid is None else allowed_uid
        self._period = 1.0 / progress_hz
        self._server: uvicorn.Server | None = None
        self._socket: socket.socket | None = None
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Bind the socket and start serving (returns once connections are accepted)."""
        config = uvicorn.Config(
            self._api.app(), http=peer_checked_protocol(self._allowed_uid), ws="none",
            lifespan="off", log_level="warning", access_log=False, server_header=False,
            date_header=False, timeout_graceful_shutdown=int(SHUTDOWN_GRACE_S),
            timeout_keep_alive=30)
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        self._socket = bind_private_socket(self.socket_path)
        await server.startup(sockets=[self._socket])
        self._server = server
        self._tasks = [asyncio.create_task(server.main_loop()),
                       asyncio.create_task(self._tick_progress())]

    async def close(self, end: End) -> None:
        """Tell every event client the batch ended, stop serving, remove the socket."""
        self._hub.finish(end)
        server = self._server
        if server is None:
            return
        self._tasks[1].cancel()
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._tasks)
        await server.shutdown(sockets=[self._socket] if self._socket else None)
        # A client that stopped reading keeps its connection open with unsent bytes even
        # after the graceful period; cut it rather than wait on it forever.
        for connection in list(server.server_state.connections):
            connection.transport.abort()
        self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    async def _tick_progress(self) -> None:
        while True:
            await asyncio.sleep(self._period)
            if self._hub.subscribers:
                self._hub.publish_progress(ProgressEvent.of(self._engine.progress(), time.time()))

"""Connecting a batch to its servers: clients, the pool, and what the servers say they serve.

Servers start *paused* and are admitted by their first passing health check, so a server
that is down when the batch starts costs no request attempts. ``shard_metadata`` asks the
servers for ``/model_info`` and ``/server_info`` (best effort) to record in every shard
which model produced it; servers that report different models are logged as a warning.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
import msgspec

from eagle_tui.core.capture.batch import PreparedBatch
from eagle_tui.core.capture.clientgroup import POOL_SIZE, ClientGroup, pools_for
from eagle_tui.core.capture.config import CaptureConfig, public_url
from eagle_tui.core.capture.dispatch import Server, ServerClient, ServerPool
from eagle_tui.core.clock import Clock
from eagle_tui.core.errors import SGLangError
from eagle_tui.core.sglang import ClientTimeouts, SGLangClient
from eagle_tui.core.shards.schema import ShardMetadata

log = logging.getLogger(__name__)

INFO_TIMEOUT_S = 10.0


def default_client_factory(config: CaptureConfig) -> Callable[[str], ServerClient]:
    """Real SGLang clients with the batch's timeouts and key, in small connection pools
    (see ``core.capture.clientgroup``)."""
    timeouts = ClientTimeouts(connect=5.0, health=20.0, info=INFO_TIMEOUT_S,
                              generate=config.request_timeout_s)
    # httpx builds a TLS context per client unless given one (~35 ms each, even for
    # http:// URLs); one shared default context keeps certificate checks for https.
    tls = ssl.create_default_context()
    limits = httpx.Limits(max_connections=POOL_SIZE + 2,  # +2: health and abort calls
                          max_keepalive_connections=POOL_SIZE + 2)

    def make(url: str) -> ServerClient:
        clients: list[ServerClient] = [
            SGLangClient(url, api_key=config.api_key, timeouts=timeouts,
                         transport=httpx.AsyncHTTPTransport(verify=tls, limits=limits))
            for _ in range(pools_for(config.concurrency))
        ]
        return ClientGroup(clients)

    return make


@asynccontextmanager
async def open_pool(
    config: CaptureConfig,
    clock: Clock,
    client_factory: Callable[[str], ServerClient] | None = None,
) -> AsyncIterator[ServerPool]:
    """A pool over ``config.servers`` (all paused until healthy); clients closed on exit."""
    make = client_factory or default_client_factory(config)
    clients = [make(url) for url in config.servers]
    try:
        servers = [Server(client, config.concurrency) for client in clients]
        yield ServerPool(servers, clock, start_paused=True)
    finally:
        await asyncio.gather(*(c.aclose() for c in clients), return_exceptions=True)


async def shard_metadata(
    config: CaptureConfig, batch: PreparedBatch, pool: ServerPool
) -> ShardMetadata:
    """Provenance for every shard: tokenizer, template, sampling, boundaries, server model."""
    infos = await asyncio.gather(*(_server_facts(s.client) for s in pool.servers))
    reachable = [info for info in infos if info is not None]
    model_paths = sorted({str(i["model_path"]) for i in reachable})
    if len(model_paths) > 1:
        log.warning("the servers report different models %s; rows will mix them", model_paths)
    first = reachable[0] if reachable else {}
    tokenizer = batch.tokenizer
    return ShardMetadata(
        tokenizer_name=tokenizer.name,
        tokenizer_path=str(tokenizer.path),
        tokenizer_fingerprint=tokenizer.fingerprint(),
        template_hash=tokenizer.template_hash(),
        sampling=msgspec.to_builtins(batch.batch_config.sampling),
        server_model_path=first.get("model_path"),
        server_version=first.get("version"),
        boundary_ids=batch.boundaries.as_dict(),
        vocab_size=batch.vocab_size,
        extra={
            "template_kwargs": dict(config.template_kwargs),
            "presets": [p.name for p in config.presets],
            "servers": _public(config.servers),
            **_turns_extra(batch),
        },
        schema_version=batch.manifest.schema_version,
    )


def _turns_extra(batch: PreparedBatch) -> dict[str, object]:
    """How a multi-turn batch regenerated its conversations (nothing for single-turn)."""
    turns = batch.batch_config.turns
    return {} if isinstance(turns, msgspec.UnsetType) else {"turns": msgspec.to_builtins(turns)}


async def _server_facts(client: ServerClient) -> dict[str, Any] | None:
    """Model path and version of one server, or None when it does not answer in time."""
    try:
        async with asyncio.timeout(INFO_TIMEOUT_S):
            model, server = await asyncio.gather(client.model_info(), client.server_info())
    except (SGLangError, TimeoutError) as e:
        detail = e.message if isinstance(e, SGLangError) else "timed out"
        log.info("no model/server info from %s: %s", public_url(client.base_url), detail)
        return None
    return {"model_path": model.model_path, "version": server.version}


def _public(urls: Sequence[str]) -> list[str]:
    return [public_url(u) for u in urls]

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

import msgspec

from eagle_tui.core.capture.batch import PreparedBatch
from eagle_tui.core.capture.config import CaptureConfig
from eagle_tui.core.capture.dispatch import Server, ServerPool
from eagle_tui.core.capture.routed import (
    RoutedClient,
    first_worker_facts,
    listed_limit,
    records_json,
    router_limit,
)
from eagle_tui.core.clock import Clock
from eagle_tui.core.errors import SGLangError
from eagle_tui.core.sglang import ClientTimeouts, SGLangClient
from eagle_tui.core.sglang.client import KEEPALIVE_EXPIRY_S
from eagle_tui.core.sglang.router import RouterProbe, WorkerAccess
from eagle_tui.core.sglang.transport import LeanTransport
from eagle_tui.core.shards.manifest import RouterRecord
from eagle_tui.core.shards.schema import FooterServer, FooterTokenizer, ShardMetadata
from eagle_tui.core.urls import ServerURL

log = logging.getLogger(__name__)

INFO_TIMEOUT_S = 10.0


ClientFactory = Callable[[ServerURL], "SGLangClient | RoutedClient"]
"""A batch's clients other than the default (tests): a ``RoutedClient`` for a router."""


def default_client_factory(config: CaptureConfig) -> Callable[..., SGLangClient]:
    """``make(url, limit=None)``: a real SGLang client with the batch's timeouts and key, its
    connection pool sized for ``limit`` requests in flight (``--concurrency`` unless given)."""
    timeouts = ClientTimeouts(connect=5.0, health=20.0, info=INFO_TIMEOUT_S,
                              generate=config.request_timeout_s)
    # A TLS context costs ~35 ms to build: one, shared, and only for https servers.
    tls = ssl.create_default_context() if any(
        u.scheme == "https" for u in config.servers) else None
    api_key = config.api_key or None

    def make(url: ServerURL, limit: int | None = None) -> SGLangClient:
        connections = (limit or config.concurrency) + 2  # +2: health and abort calls
        return SGLangClient(url, api_key=api_key, timeouts=timeouts,
                            transport=LeanTransport(verify=tls, max_connections=connections,
                                                    keepalive_expiry=KEEPALIVE_EXPIRY_S))

    return make


@asynccontextmanager
async def open_pool(
    config: CaptureConfig, clock: Clock, client_factory: ClientFactory | None = None,
) -> AsyncIterator[ServerPool]:
    """A pool over ``config.servers`` (all paused until healthy); clients closed on exit.

    With the default clients each URL is first asked whether it is SGLang's router; a router
    gets a ``RoutedClient`` and ``--concurrency`` for each worker it lists. Clients from
    ``client_factory`` are taken as they are (a ``RoutedClient`` among them too)."""
    if client_factory is None:
        make = default_client_factory(config)
        opened = await asyncio.gather(*(_open(url, config, make) for url in config.servers))
    else:
        opened = [(c, await _limit(c, config.concurrency))
                  for c in (client_factory(url) for url in config.servers)]
    try:
        yield ServerPool([_server(client, limit) for client, limit in opened], clock,
                         start_paused=True)
    finally:
        await asyncio.gather(*(c.aclose() for c, _ in opened), return_exceptions=True)


def _server(client: SGLangClient | RoutedClient, limit: int) -> Server:
    if isinstance(client, RoutedClient):
        return Server(client.client, limit, router=client)
    return Server(client, limit)


async def _open(url: ServerURL, config: CaptureConfig, make: Callable[..., SGLangClient]) -> (
    tuple[SGLangClient | RoutedClient, int]
):
    """The client and request limit of one server URL: a RoutedClient with a client for
    ``--concurrency`` per listed worker when the URL is SGLang's router."""
    timeouts = ClientTimeouts(connect=5.0, health=20.0, info=INFO_TIMEOUT_S)
    api_key = config.api_key or None
    probe = RouterProbe(SGLangClient(url, api_key=api_key, timeouts=timeouts), api_key=api_key,
                        access=worker_access(config))
    if not await probe.detect():
        await probe.client.aclose()
        return make(url), config.concurrency
    view = await probe.look()
    limit = listed_limit(view, config.concurrency)
    routed = RoutedClient(make(url, limit), probe)
    routed.view = view
    _log_router(routed, limit, config.concurrency)
    return routed, limit


def worker_access(config: CaptureConfig) -> WorkerAccess:
    """Whom a router's probe may ask directly: the ``--server`` URLs, and every listed
    worker with ``--trust-router-workers``."""
    return WorkerAccess(frozenset(config.servers), listed=config.trust_router_workers is True)


async def _limit(client: SGLangClient | RoutedClient, per_server: int) -> int:
    if not isinstance(client, RoutedClient):
        return per_server
    limit = await router_limit(client, per_server)
    _log_router(client, limit, per_server)
    return limit


def _log_router(client: RoutedClient, limit: int, per_worker: int) -> None:
    log.info("%s is SGLang's router with %d workers listed; up to %d requests in flight "
             "through it", client.client.base_url, limit // per_worker, limit)
    if client.view is not None and client.view.capped:
        log.warning("%s", client.view.capped)


async def shard_metadata(
    config: CaptureConfig, batch: PreparedBatch, pool: ServerPool,
    routers: Sequence[RouterRecord] = (),
) -> ShardMetadata:
    """Provenance for every shard: tokenizer, template, sampling, boundaries, server model.
    A router's own answers say nothing of the model's SGLang, so its workers tell."""
    direct = [s.client for s in pool.servers if not s.is_router]
    infos = await asyncio.gather(*(_server_facts(c) for c in direct))
    reachable = [info for info in infos if info is not None]
    reachable += [{"model_path": w.model_path, "version": w.version}
                  for r in routers for w in r.workers if w.source == "worker"]
    _warn_if_mixed(reachable)
    first = reachable[0] if reachable else dict(first_worker_facts(routers))
    tokenizer = batch.tokenizer
    return ShardMetadata(
        tokenizer=FooterTokenizer(name=tokenizer.name, path=str(tokenizer.path),
                                  fingerprint=tokenizer.fingerprint(),
                                  vocab_size=batch.vocab_size),
        template_hash=tokenizer.template_hash(),
        sampling=msgspec.to_builtins(batch.batch_config.sampling),
        server=FooterServer(model_path=first.get("model_path"), version=first.get("version")),
        boundary_ids=batch.boundaries.as_dict(),
        extra={
            "template_kwargs": dict(config.template_kwargs),
            "presets": [p.name for p in config.presets],
            "servers": [u.public for u in config.servers],
            **({"routers": records_json(routers)} if routers else {}),
            **_turns_extra(batch),
        },
        schema_version=batch.manifest.schema_version,
    )


def _warn_if_mixed(facts: Sequence[dict[str, Any]]) -> None:
    for key, what in (("model_path", "models"), ("version", "SGLang versions")):
        values = sorted({str(f[key]) for f in facts})
        if len(values) > 1:
            log.warning("the servers report different %s %s; rows will mix them", what, values)


def _turns_extra(batch: PreparedBatch) -> dict[str, object]:
    """How a multi-turn batch regenerated its conversations (nothing for single-turn)."""
    turns = batch.batch_config.turns
    return {} if isinstance(turns, msgspec.UnsetType) else {"turns": msgspec.to_builtins(turns)}


async def _server_facts(client: SGLangClient) -> dict[str, Any] | None:
    """Model path and version of one server, or None when it does not answer in time."""
    try:
        async with asyncio.timeout(INFO_TIMEOUT_S):
            model, server = await asyncio.gather(client.model_info(), client.server_info())
    except (SGLangError, TimeoutError) as e:
        detail = e.message if isinstance(e, SGLangError) else "timed out"
        log.info("no model/server info from %s: %s", client.base_url, detail)
        return None
    return {"model_path": model.model_path, "version": server.version}

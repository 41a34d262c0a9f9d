"""A capture through SGLang's router: requests go through it, health, abort and provenance
come from its workers (``core.sglang.router`` has what was measured).

``RoutedClient`` is a router URL's side in the pool, beside the router's own client (which
sends the requests). To dispatch it is one server whose request limit is ``--concurrency``
per worker the router listed at the start; its health check answers 200 only while a worker
can serve (the router's own ``/health`` is 200 with every worker dead); an abort goes to the
workers directly (the router has no ``/abort_request``; the drainer also cuts the
connections, which the router passes on).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import msgspec

from eagle_tui.core.capture.config import CaptureConfig
from eagle_tui.core.capture.dispatch import ServerPool
from eagle_tui.core.capture.sender import sampling_params
from eagle_tui.core.errors import ConfigError
from eagle_tui.core.sglang import SGLangClient
from eagle_tui.core.sglang.router import (
    RouterProbe,
    RouterView,
    WorkerFacts,
    dropped_sampling_keys,
)
from eagle_tui.core.sglang.types import HealthResult, SamplingParams
from eagle_tui.core.shards.manifest import RouterRecord, WorkerRecord

log = logging.getLogger(__name__)


class RoutedClient:
    """A router's side of its server in the pool: ``client`` (the router's own client) sends
    the requests and answers model and server info; this answers the health checks and takes
    the aborts, by asking the workers through ``probe``. ``view`` is the newest look at them
    (None before the first)."""

    def __init__(self, client: SGLangClient, probe: RouterProbe) -> None:
        self.client = client
        self.probe = probe
        self.view: RouterView | None = None

    async def health(self, *, generate: bool = False, timeout: float | None = None) -> (
        HealthResult
    ):
        """200 while a worker can serve, 503 otherwise (router down: the error passes)."""
        started = asyncio.get_running_loop().time()
        result = await self.probe.client.health(timeout=timeout)
        if not result.healthy:
            return result
        self.view = await self.probe.look()
        status = 200 if self.view.can_serve else 503
        return HealthResult(status, asyncio.get_running_loop().time() - started)

    async def abort(self, rid: str) -> None:
        """Abort ``rid`` (a prefix) on every worker we may contact; the router cannot (closing
        the connection, which the drainer does, is what it passes on)."""
        view = self.view or await self.probe.look()
        took = await self.probe.abort_on_workers(rid, [w.url for w in view.workers])
        log.info("abort of %s sent to %d of %d workers behind %s directly", rid, len(took),
                 len(view.workers), self.client.base_url)

    def contact_note(self) -> str:
        """Which addresses this router's requests, and the API key, went to."""
        workers = sorted(self.probe.contacted)
        router = self.client.base_url
        if not workers:
            return (f"contacted {router} only; the workers it lists were not asked directly "
                    "(--trust-router-workers asks them, with the API key)")
        shown = ", ".join(workers[:8]) + (f" and {len(workers) - 8} more" if len(workers) > 8
                                          else "")
        return f"contacted {router} and, directly, its workers {shown}"

    async def worker_facts(self) -> list[WorkerFacts]:
        """Model and version of every worker the router lists."""
        view = self.view or await self.probe.look()
        return await self.probe.facts(view)

    async def aclose(self) -> None:
        """Close the request client, the worker clients and the router's probe client."""
        await self.client.aclose()
        await self.probe.aclose()
        await self.probe.client.aclose()


async def router_limit(client: RoutedClient, per_worker: int) -> int:
    """Requests in flight for a router: ``per_worker`` for each worker it lists now."""
    client.view = await client.probe.look()
    return listed_limit(client.view, per_worker)


def listed_limit(view: RouterView, per_worker: int) -> int:
    """``per_worker`` for each worker ``view`` lists (at least one worker's worth; the view
    holds at most ``MAX_WORKERS``, so a list of thousands does not size a window of
    millions)."""
    return per_worker * max(1, sum(w.listed for w in view.workers))


def routers_of(pool: ServerPool) -> list[RoutedClient]:
    """The router side of every router in ``pool``."""
    return [s.checks for s in pool.servers if isinstance(s.checks, RoutedClient)]


def router_notes(pool: ServerPool) -> list[str]:
    """For the summary: each router's contacted addresses, and a capped worker list."""
    routed = routers_of(pool)
    capped = [c.view.capped for c in routed if c.view is not None and c.view.capped]
    return [*capped, *(c.contact_note() for c in routed)]


def check_sampling(pool: ServerPool, sampling: Sequence[SamplingParams], *, force: bool) -> (
    list[str]
):
    """Refuse sampling keys a router in ``pool`` would drop without a word (a capture must not
    run with other sampling than asked); with ``force`` a loud warning instead. The notes."""
    routers = [s.url for s in pool.servers if s.is_router]
    keys = {key for params in sampling for key in params.to_json()}
    dropped = dropped_sampling_keys(keys)
    if not routers or not dropped:
        return []
    message = (f"the router {', '.join(routers)} drops the sampling_params {dropped} without "
               "an error (SGLang's router passes on only the keys it knows), so the workers "
               "would sample without them")
    if not force:
        raise ConfigError(f"{message}; send to the workers directly (--server per worker), "
                          "or pass --force to capture anyway")
    log.warning("%s; capturing anyway (--force)", message)
    return [f"forced past a router dropping sampling_params {dropped}"]


def requested_sampling(config: CaptureConfig) -> list[SamplingParams]:
    """The ``sampling_params`` the batch will send, one per preset (the stop ids are filled
    in later from the tokenizer; only the keys matter here)."""
    return [sampling_params(p, max_new_tokens=config.max_new_tokens, stop_token_ids=(0,),
                            extra=config.extra_sampling) for p in config.presets]


async def router_records(pool: ServerPool) -> list[RouterRecord]:
    """Provenance of every router in ``pool``: its workers with model and version."""
    routed = routers_of(pool)
    facts = await asyncio.gather(*(c.worker_facts() for c in routed))
    return [RouterRecord(url=c.client.base_url,
                         workers=[WorkerRecord(url=f.url, model_path=f.model_path,
                                               version=f.version, source=f.source)
                                  for f in worker_facts])
            for c, worker_facts in zip(routed, facts, strict=True)]


def first_worker_facts(records: Sequence[RouterRecord]) -> dict[str, str | None]:
    """Model path and version of the first worker that told them (shard metadata)."""
    for record in records:
        for worker in record.workers:
            if worker.version is not None or worker.model_path is not None:
                return {"model_path": worker.model_path, "version": worker.version}
    return {}


def records_json(records: Sequence[RouterRecord]) -> list[object]:
    """The records as JSON-ready values (shard footers)."""
    return [msgspec.to_builtins(r) for r in records]

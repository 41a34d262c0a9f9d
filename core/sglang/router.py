"""SGLang's router (the model gateway, PyPI ``sglang-router``) in front of SGLang workers:
tell it from a server, list its workers, and judge whether any of them can serve.

What the router does, measured on 0.3.2 (``tests/sglang/test_router_real.py`` measures it
again against the installed router):

- ``GET /workers`` lists the registered workers (``url``, ``is_healthy``, ``load``,
  ``model_id``, ``metadata``); a plain SGLang server answers 404 there;
- ``GET /readiness`` is 200 ``{"status": "ready", "healthy_workers": n, ...}`` or 503;
- ``/health`` (and ``/health_generate``) answer 200 even with no worker at all, and the
  router marks a dead worker unhealthy only after ``--health-failure-threshold`` failed
  checks ``--health-check-interval-secs`` apart (3 x 60 s by default): its own view lags;
- a worker still loading is not listed until it has registered;
- ``/get_server_info`` is the router's own object (no SGLang version, no model);
- ``sampling_params`` keys it does not know are dropped without a word (``ROUTER_SAMPLING_KEYS``
  are the ones it passes on);
- ``/abort_request`` is 404: closing the connection is what stops a request on the worker.

So "ready" here means a worker can serve: listed healthy by the router and, when the worker
answers us directly, healthy by its own ``/health`` too.

Whom we talk to: the router's list is the router's word, not the user's, so a worker is
asked directly (``/health``, ``/metrics``, ``/model_info``, ``/server_info``,
``/abort_request``, each with the API key) only when the user named its URL too or opted in
(:class:`WorkerAccess`, ``--trust-router-workers``); otherwise the router's word stands. A
listed URL is used only when it is a plain ``http(s)://host[:port][/prefix]`` (no user info,
query or fragment); any other is shown as ``invalid`` and never counts as able to serve.
At most :data:`MAX_WORKERS` listed workers are looked at, :data:`PROBES_AT_ONCE` asked at a
time; every address asked is kept (``contacted``) so the user is told.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import msgspec

from eagle_tui.core.errors import SGLangError
from eagle_tui.core.sglang.client import ClientTimeouts, SGLangClient, parse_prometheus
from eagle_tui.core.sglang.types import HealthResult
from eagle_tui.core.urls import ServerURL, server_url_problem, shown

ROUTER_SAMPLING_KEYS = frozenset({
    "max_new_tokens", "min_new_tokens", "stop", "stop_token_ids", "temperature", "top_p",
    "top_k", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty", "n",
    "json_schema", "regex", "ebnf", "ignore_eos", "skip_special_tokens", "no_stop_trim",
    "sampling_seed",
})
"""``sampling_params`` keys router 0.3.2 passes on to the worker; it drops every other key
(``logit_bias``, ``stop_regex``, ``custom_params``, ``spaces_between_special_tokens``, …)
and the worker samples as if it had not been sent."""

WORKER_TIMEOUTS = ClientTimeouts(connect=2.0, health=5.0, info=5.0, generate=5.0)
"""A direct look at a worker is a side check: it must not hold up the router's health."""

MAX_WORKERS = 64
"""Listed workers looked at (the first ones, in the router's order): a list of thousands is
a broken or hostile router, and each worker looked at costs a client and a probe."""
PROBES_AT_ONCE = 8
"""Workers asked directly at the same time."""
NOT_CONTACTED = "not asked directly (not named; --trust-router-workers allows it)"
UNCHECKED_LABEL = "router: healthy, not checked"
"""A worker the router lists healthy that eagle-tui did not check itself: the router's word."""

Answer = Literal["healthy", "unhealthy", "down", "unknown", "invalid"]


@dataclass(frozen=True)
class WorkerAccess:
    """Which workers may be asked directly, API key included: the URLs the user named
    (``named``) and, with ``listed``, every valid URL the router lists."""

    named: frozenset[ServerURL] = frozenset()
    listed: bool = False

    def allows(self, url: ServerURL) -> bool:
        """True when ``url`` may get requests and the key."""
        return self.listed or url in self.named


TRUST_LISTED = WorkerAccess(listed=True)


def worker_url(text: str) -> ServerURL | str:
    """A listed worker's URL as a value, or why it is not used (never echoing it)."""
    problem = server_url_problem(text)
    if problem is None and "@" in text.partition("://")[2].partition("/")[0]:
        problem = "carries user info (user:password@), which would go out as Basic auth"
    if problem is not None:
        return f"not used: the URL {problem.split(';')[0]}"
    return ServerURL.parse(text)


def _public_form(text: str) -> str:
    """A listed URL for people and files: its public form, or a safe quote of a bad one."""
    checked = worker_url(text)
    return checked.public if isinstance(checked, ServerURL) else shown(text)


class RouterWorker(msgspec.Struct, frozen=True):
    """One entry of the router's ``GET /workers`` (keys this reader does not name ignored)."""

    url: str
    is_healthy: bool = False
    load: int = -1
    model_id: str | None = None
    worker_type: str = "regular"
    metadata: dict[str, object] = {}

    @property
    def model_path(self) -> str | None:
        """The model the router says the worker serves."""
        value = self.metadata.get("model_path", self.model_id)
        return value if isinstance(value, str) else None


class WorkersDoc(msgspec.Struct, frozen=True):
    """The router's ``GET /workers``."""

    workers: list[RouterWorker]
    total: int | None = None


class Readiness(msgspec.Struct, frozen=True):
    """The router's ``GET /readiness`` (200 ready, 503 not)."""

    status: str = ""
    healthy_workers: int | None = None
    total_workers: int | None = None
    reason: str | None = None


_WORKERS = msgspec.json.Decoder(WorkersDoc)
_READINESS = msgspec.json.Decoder(Readiness)


@dataclass(frozen=True)
class WorkerProbe:
    """What a worker said when asked directly.

    ``answer``: ``healthy`` (``/health`` 200), ``unhealthy`` (any other status: loading,
    warming up, draining), ``down`` (connection refused: nothing listens), ``unknown`` (no
    route, timeout, or not asked: the worker may be fine, so the router's word counts),
    ``invalid`` (a URL we do not use: see :func:`worker_url`).
    """

    answer: Answer
    detail: str = ""
    running: float | None = None
    queued: float | None = None


@dataclass(frozen=True)
class WorkerView:
    """One worker as the router lists it (``listed``) and as it answered us (``probe``)."""

    url: str
    listed: bool
    router_healthy: bool
    load: int | None
    model_path: str | None
    probe: WorkerProbe

    @property
    def can_serve(self) -> bool:
        """The router would send to it and it did not tell us otherwise."""
        return self.listed and self.router_healthy and self.probe.answer in ("healthy", "unknown")

    @property
    def checked(self) -> bool:
        """We asked the worker itself and it answered (or refused the connection): its state
        is ours, not the router's word."""
        return self.probe.answer in ("healthy", "unhealthy", "down")

    @property
    def state(self) -> str:
        """One word for people: ready (the router sends to it and it answered us healthy),
        unchecked (the router calls it healthy; we did not, or could not, ask it: see
        :attr:`label`), joining (healthy, the router does not send to it yet), loading
        (answers 503), pending (not registered, port closed: loading or gone), unhealthy,
        down. A worker killed a moment ago stays healthy in the router's list until its
        health checks fail (3 x 60 s by default): only our own look calls it ready."""
        if self.can_serve:
            return "ready" if self.probe.answer == "healthy" else "unchecked"
        answer = self.probe.answer
        if answer == "invalid":
            return "invalid"
        if answer == "healthy":
            return "joining"
        if not self.listed:
            return "loading" if answer == "unhealthy" else "pending"
        return "down" if answer == "down" else "unhealthy"

    @property
    def label(self) -> str:
        """The state as people read it: whose word it is when it is not ours."""
        return UNCHECKED_LABEL if self.state == "unchecked" else self.state


@dataclass(frozen=True)
class RouterView:
    """A router and its workers at one moment."""

    url: str
    at: float
    readiness: Readiness | None
    workers: tuple[WorkerView, ...] = ()
    error: str | None = None
    metrics: dict[str, float] | None = None
    listed_total: int = 0
    contacted: tuple[str, ...] = ()

    @property
    def capped(self) -> str:
        """One line when the router lists more workers than are looked at (else empty)."""
        if self.listed_total <= MAX_WORKERS:
            return ""
        return (f"the router lists {self.listed_total:,} workers; only the first "
                f"{MAX_WORKERS} are looked at and sized for (at most {PROBES_AT_ONCE} asked "
                "at once)")

    @property
    def can_serve(self) -> bool:
        """True when at least one worker can take a request now."""
        return any(w.can_serve for w in self.workers)

    @property
    def ready_workers(self) -> int:
        """How many workers can serve by our own look (the router lists them healthy and
        they answered us healthy)."""
        return sum(w.state == "ready" for w in self.workers)

    @property
    def unchecked_workers(self) -> int:
        """How many workers the router calls healthy that we did not check ourselves."""
        return sum(w.state == "unchecked" for w in self.workers)

    def reason(self) -> str:
        """Why it cannot serve (empty when it can)."""
        if self.can_serve:
            return ""
        if self.error:
            return self.error
        if not self.workers:
            return "the router lists no worker"
        states = ", ".join(f"{w.url} {w.state}" for w in self.workers)
        return f"no worker can serve ({states})"


class RouterProbe:
    """Looks at one URL: is it a router, and which of its workers can serve.

    Worker URLs come from the router's ``/workers`` plus ``also_workers`` (workers the caller
    knows of, e.g. from the router's command line, that may still be loading). Each worker
    is asked directly with its own small client; ``with_load`` adds its ``/metrics``
    (running and queued requests).
    """

    def __init__(self, client: SGLangClient, *, api_key: str | None = None,
                 access: WorkerAccess = WorkerAccess()) -> None:
        self.client = client
        self._api_key = api_key
        self._access = access
        self._workers: dict[str, SGLangClient] = {}
        self._gate = asyncio.Semaphore(PROBES_AT_ONCE)
        self.contacted: set[str] = set()  # workers asked directly, public URLs
        self.is_router: bool | None = None

    @property
    def url(self) -> str:
        return self.client.base_url

    async def detect(self) -> bool | None:
        """True for a router, False for a plain server, None when it did not answer."""
        if self.is_router is not None:
            return self.is_router
        try:
            status, body = await self.client.get_raw("/workers")
        except SGLangError:
            return None
        if status in (404, 405):
            self.is_router = False
        elif status == 200:
            self.is_router = _decodes(_WORKERS, body)
        return self.is_router

    async def look(self, *, with_load: bool = False,
                   also_workers: Iterable[str] = ()) -> RouterView:
        """The router's workers (the first :data:`MAX_WORKERS`), each also asked directly
        when :class:`WorkerAccess` allows it."""
        listed, readiness = await asyncio.gather(self._listed(), self._readiness())
        if isinstance(listed, str):
            return RouterView(self.url, time.time(), readiness, error=listed)
        total, listed = len(listed), listed[:MAX_WORKERS]
        known = {_public_form(w.url) for w in listed}
        extra = [u for u in also_workers if _public_form(u) not in known][:MAX_WORKERS]
        probes = await asyncio.gather(
            *(self.probe_worker(w.url, with_load=with_load) for w in listed),
            *(self.probe_worker(u, with_load=with_load) for u in extra))
        views = [WorkerView(_public_form(w.url), True, w.is_healthy,
                            w.load if w.load >= 0 else None, w.model_path, p)
                 for w, p in zip(listed, probes, strict=False)]
        views += [WorkerView(_public_form(u), False, False, None, None, p)
                  for u, p in zip(extra, probes[len(listed):], strict=True)]
        return RouterView(self.url, time.time(), readiness, tuple(views), listed_total=total,
                          contacted=(self.url, *sorted(self.contacted)))

    async def health(self, timeout: float | None = None) -> HealthResult:
        """``/health`` as a server would mean it: 200 only when a worker can serve."""
        started = time.monotonic()
        result = await self.client.health(timeout=timeout)
        if not result.healthy or not await self.detect():
            return result
        view = await self.look()
        status = 200 if view.can_serve else 503
        return HealthResult(status=status, latency_s=time.monotonic() - started)

    async def probe_worker(self, url: str, *, with_load: bool = False) -> WorkerProbe:
        """Ask one worker directly, when it is a usable URL we may contact."""
        checked = worker_url(url)
        if isinstance(checked, str):
            return WorkerProbe("invalid", checked)
        if not self._access.allows(checked):
            return WorkerProbe("unknown", NOT_CONTACTED)
        async with self._gate:
            return await self._ask(self._worker(checked), with_load=with_load)

    async def _ask(self, client: SGLangClient, *, with_load: bool) -> WorkerProbe:
        try:
            health = await client.health()
        except SGLangError as e:
            return WorkerProbe("down" if _refused(e) else "unknown", e.message)
        if not health.healthy:
            return WorkerProbe("unhealthy", f"/health answered {health.status}")
        if not with_load:
            return WorkerProbe("healthy")
        running, queued = await self._load(client)
        return WorkerProbe("healthy", running=running, queued=queued)

    def allowed(self, url: str) -> ServerURL | None:
        """``url`` as a value when it is usable and may be contacted, else None."""
        checked = worker_url(url)
        if isinstance(checked, str) or not self._access.allows(checked):
            return None
        return checked

    async def abort_on_workers(self, rid: str, workers: Sequence[str]) -> list[str]:
        """``/abort_request`` for ``rid`` (a prefix: SGLang aborts every rid starting with it)
        on each worker we may contact; the URLs that took it."""
        async def one(url: ServerURL) -> str | None:
            async with self._gate:
                try:
                    await self._worker(url).abort(rid)
                except SGLangError:
                    return None
            return url.public

        allowed = [u for u in (self.allowed(w) for w in workers) if u is not None]
        done = await asyncio.gather(*(one(u) for u in allowed))
        return [u for u in done if u is not None]

    async def facts(self, view: RouterView) -> list[WorkerFacts]:
        """Model and SGLang version of each listed worker: asked directly when it answers,
        else the model the router lists and no version."""
        return list(await asyncio.gather(*(self._facts(w) for w in view.workers if w.listed)))

    async def _facts(self, worker: WorkerView) -> WorkerFacts:
        checked = self.allowed(worker.url)
        if checked is None:
            return WorkerFacts(worker.url, worker.model_path, None, worker.can_serve, "router")
        client = self._worker(checked)
        try:
            async with self._gate:
                model, info = await asyncio.gather(client.model_info(), client.server_info())
        except SGLangError:
            return WorkerFacts(worker.url, worker.model_path, None, worker.can_serve, "router")
        return WorkerFacts(worker.url, model.model_path or worker.model_path, info.version,
                           worker.can_serve)

    async def aclose(self) -> None:
        """Close the worker clients (the router's client belongs to the caller)."""
        clients, self._workers = list(self._workers.values()), {}
        await asyncio.gather(*(c.aclose() for c in clients), return_exceptions=True)

    async def _listed(self) -> list[RouterWorker] | str:
        try:
            status, body = await self.client.get_raw("/workers")
        except SGLangError as e:
            return e.message
        if status != 200:
            return f"/workers answered {status}"
        try:
            return _WORKERS.decode(body).workers
        except msgspec.DecodeError as e:
            return f"/workers is not a router's worker list ({e})"

    async def _readiness(self) -> Readiness | None:
        try:
            _, body = await self.client.get_raw("/readiness")
            return _READINESS.decode(body)
        except (SGLangError, msgspec.DecodeError):
            return None

    async def _load(self, client: SGLangClient) -> tuple[float | None, float | None]:
        try:
            metrics = await client.metrics()
        except SGLangError:
            return None, None
        if metrics is None:
            return None, None
        return metrics.get("sglang:num_running_reqs"), metrics.get("sglang:num_queue_reqs")

    def _worker(self, url: ServerURL) -> SGLangClient:
        """The client of a worker :meth:`allowed` passed; asking it counts as contacting."""
        client = self._workers.get(url.public)
        if client is None:
            client = SGLangClient(url, api_key=self._api_key, timeouts=WORKER_TIMEOUTS,
                                  max_connections=4)
            self._workers[url.public] = client
        self.contacted.add(url.public)
        return client


async def look_at(url: ServerURL, *, api_key: str | None = None, with_load: bool = True,
                  also_workers: Iterable[str] = (), metrics_url: ServerURL | None = None,
                  access: WorkerAccess = WorkerAccess()) -> RouterView | None:
    """One look at ``url``: its workers when it is a router (None when it is not, or does not
    answer); ``metrics_url`` is the router's Prometheus endpoint (``--prometheus-port``)."""
    async with SGLangClient(url, api_key=api_key, timeouts=WORKER_TIMEOUTS) as client:
        probe = RouterProbe(client, api_key=api_key, access=access)
        try:
            if not await probe.detect():
                return None
            view = await probe.look(with_load=with_load, also_workers=also_workers)
        finally:
            await probe.aclose()
    if metrics_url is None:
        return view
    return dataclasses.replace(view, metrics=await router_metrics(metrics_url))


async def router_metrics(metrics_url: ServerURL) -> dict[str, float] | None:
    """The router's own Prometheus series (``smg_*``, summed over labels; histograms left
    out), None when they cannot be read."""
    async with SGLangClient(metrics_url, timeouts=WORKER_TIMEOUTS) as client:
        try:
            status, body = await client.get_raw("/metrics")
        except SGLangError:
            return None
    if status != 200:
        return None
    series = parse_prometheus(body.decode("utf-8", "replace"))
    return {name: value for name, value in sorted(series.items())
            if name.startswith("smg_") and not name.endswith(("_bucket", "_sum", "_count"))}


def dropped_sampling_keys(sampling_params: Iterable[str]) -> list[str]:
    """The keys of ``sampling_params`` a router would drop, sorted."""
    return sorted(set(sampling_params) - ROUTER_SAMPLING_KEYS)


def _refused(error: BaseException) -> bool:
    """True when the connection was refused: the host is there and nothing listens (a dead
    worker), as opposed to no route or a timeout (a worker we cannot see from here)."""
    seen: BaseException | None = error
    for _ in range(8):  # the chain is short: ours <- httpx <- httpcore <- OSError <- refused
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _decodes(decoder: msgspec.json.Decoder[WorkersDoc], body: bytes) -> bool:
    try:
        decoder.decode(body)
    except msgspec.DecodeError:
        return False
    return True


@dataclass(frozen=True)
class WorkerFacts:
    """Provenance of one worker: what it serves and which SGLang it runs."""

    url: str
    model_path: str | None
    version: str | None
    healthy: bool
    source: str = "worker"


__all__ = [
    "MAX_WORKERS",
    "NOT_CONTACTED",
    "PROBES_AT_ONCE",
    "ROUTER_SAMPLING_KEYS",
    "TRUST_LISTED",
    "UNCHECKED_LABEL",
    "Readiness",
    "RouterProbe",
    "RouterView",
    "RouterWorker",
    "WorkerAccess",
    "WorkerFacts",
    "WorkerProbe",
    "WorkerView",
    "dropped_sampling_keys",
    "look_at",
    "router_metrics",
    "worker_url",
]

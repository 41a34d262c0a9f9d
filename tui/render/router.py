"""A router and its workers as text and JSON (``status``, the dashboard's router card)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from eagle_tui.core.text import known
from eagle_tui.tui.render.accept import AcceptanceDoc

if TYPE_CHECKING:  # the router module pulls in httpx: the dashboard paints without it
    from eagle_tui.core.sglang.router import Readiness, RouterView, WorkerView

STATE_MARKS = {"ready": "●", "unchecked": "○", "joining": "◐", "loading": "◌", "pending": "◌",
               "unhealthy": "✕", "down": "✕", "invalid": "✕"}


class WorkerDoc(msgspec.Struct, frozen=True, kw_only=True):
    """One worker: URL, state, the router's load, running/queued from its own metrics."""

    url: str
    state: str
    label: str  # the state as people read it ("router: healthy, not checked")
    checked: bool  # eagle-tui asked the worker itself (else the state is the router's word)
    listed: bool
    router_healthy: bool
    load: int | None
    running: float | None
    queued: float | None
    model_path: str | None
    detail: str
    acceptance: AcceptanceDoc | None = None  # a speculating worker's (status fills it in)

    @classmethod
    def of(cls, worker: WorkerView) -> WorkerDoc:
        """The document of one worker of a router view."""
        return cls(url=worker.url, state=worker.state, label=worker.label,
                   checked=worker.checked, listed=worker.listed,
                   router_healthy=worker.router_healthy, load=worker.load,
                   running=worker.probe.running, queued=worker.probe.queued,
                   model_path=worker.model_path, detail=worker.probe.detail)


class RouterDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A router as ``status --json`` shows it (its ``router`` entry), each worker with its
    one-word state."""

    can_serve: bool
    ready_workers: int  # checked by eagle-tui itself
    reason: str
    readiness: Readiness | None
    error: str | None
    workers: tuple[WorkerDoc, ...]
    metrics: dict[str, float] | None
    listed_total: int = 0  # workers the router lists (only the first MAX_WORKERS are looked at)
    capped: str = ""  # one line when the list was capped
    contacted: tuple[str, ...] = ()  # the addresses asked: the router, workers when allowed
    unchecked_workers: int = 0  # healthy by the router's word only

    @classmethod
    def of(cls, view: RouterView) -> RouterDoc:
        """The document of a router view."""
        return cls(can_serve=view.can_serve, ready_workers=view.ready_workers,
                   reason=view.reason(), readiness=view.readiness, error=view.error,
                   workers=tuple(WorkerDoc.of(w) for w in view.workers), metrics=view.metrics,
                   listed_total=view.listed_total, capped=view.capped,
                   contacted=view.contacted, unchecked_workers=view.unchecked_workers)


def router_lines(router: RouterDoc) -> list[str]:
    """Lines for people from a router's document."""
    workers = router.workers
    head = f"  router: {router.ready_workers} of {len(workers)} workers can serve"
    if router.unchecked_workers:
        head += (f" by our own look; {router.unchecked_workers} healthy by the router's "
                 "word, not checked")
    if not router.can_serve:
        head += f" ({router.reason})"
    lines = [head]
    if router.capped:
        lines.append(f"  note: {router.capped}")
    lines += [f"  {STATE_MARKS.get(w.state, '?')} {w.url}  {w.label:<9} "
              f"{_load(w)}".rstrip() for w in workers]
    lines.append(f"  {contacted_line(router)}")
    if router.metrics:
        shown = ", ".join(f"{k.removeprefix('smg_')}={v:g}" for k, v in router.metrics.items())
        lines.append(f"  router metrics: {shown}")
    return lines


def contacted_line(router: RouterDoc) -> str:
    """Which addresses were asked (the router, and workers only when allowed)."""
    contacted = router.contacted
    if len(contacted) <= 1:
        return ("contacted: the router only (its workers were not asked directly; "
                "--trust-router-workers asks them, with the API key)")
    more = len(contacted) - 9
    return "contacted: " + ", ".join(contacted[:9]) + (f" and {more} more" if more > 0 else "")


def _load(worker: WorkerDoc) -> str:
    parts = known(("load {}", worker.load), ("running {:g}", worker.running),
                  ("queued {:g}", worker.queued))
    if worker.state not in ("ready", "unchecked") and worker.detail:
        parts.append(worker.detail[:80])
    return " · ".join(parts)

"""A router and its workers as text and JSON (``status``, the dashboard's router card)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:  # the router module pulls in httpx: the dashboard paints without it
    from eagle_tui.core.sglang.router import RouterView, WorkerView

STATE_MARKS = {"ready": "●", "joining": "◐", "loading": "◌", "pending": "◌",
               "unhealthy": "✕", "down": "✕", "invalid": "✕"}


def router_json(view: RouterView) -> dict[str, Any]:
    """The view as JSON-ready values, each worker with its one-word state."""
    return {
        "can_serve": view.can_serve,
        "ready_workers": view.ready_workers,
        "reason": view.reason(),
        "readiness": msgspec.to_builtins(view.readiness),
        "error": view.error,
        "workers": [worker_json(w) for w in view.workers],
        "metrics": view.metrics,
        "listed_total": view.listed_total,
        "capped": view.capped,
        "contacted": list(view.contacted),
    }


def worker_json(worker: WorkerView) -> dict[str, Any]:
    """One worker: URL, state, the router's load, running/queued from its own metrics."""
    return {"url": worker.url, "state": worker.state, "listed": worker.listed,
            "router_healthy": worker.router_healthy, "load": worker.load,
            "running": worker.probe.running, "queued": worker.probe.queued,
            "model_path": worker.model_path, "detail": worker.probe.detail}


def router_lines(router: dict[str, Any]) -> list[str]:
    """Lines for people from :func:`router_json`'s document."""
    workers = router["workers"]
    head = f"  router: {router['ready_workers']} of {len(workers)} workers can serve"
    if not router["can_serve"]:
        head += f" ({router['reason']})"
    lines = [head]
    if router.get("capped"):
        lines.append(f"  note: {router['capped']}")
    lines += [f"  {STATE_MARKS.get(w['state'], '?')} {w['url']}  {w['state']:<9} "
              f"{_load(w)}" for w in workers]
    lines.append(f"  {contacted_line(router)}")
    metrics = router.get("metrics")
    if metrics:
        shown = ", ".join(f"{k.removeprefix('smg_')}={v:g}" for k, v in metrics.items())
        lines.append(f"  router metrics: {shown}")
    return lines


def contacted_line(router: dict[str, Any]) -> str:
    """Which addresses were asked (the router, and workers only when allowed)."""
    contacted = router.get("contacted") or []
    if len(contacted) <= 1:
        return ("contacted: the router only (its workers were not asked directly; "
                "--trust-router-workers asks them, with the API key)")
    more = len(contacted) - 9
    return "contacted: " + ", ".join(contacted[:9]) + (f" and {more} more" if more > 0 else "")


def _load(worker: dict[str, Any]) -> str:
    parts = []
    if worker["load"] is not None:
        parts.append(f"load {worker['load']}")
    if worker["running"] is not None:
        parts.append(f"running {worker['running']:g}")
    if worker["queued"] is not None:
        parts.append(f"queued {worker['queued']:g}")
    if worker["state"] != "ready" and worker["detail"]:
        parts.append(worker["detail"][:80])
    return " · ".join(parts)

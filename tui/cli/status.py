"""``eagle-tui status``: one snapshot of every known server and batch, for scripts and cron.

Known servers are the ``--url`` arguments plus every server a registered batch captures
from; known batches are the registry's, except what a finished ``eagle-tui demo`` left
behind (a batch under the demo's directory that no longer runs, and its server). Each
server gets one watcher tick (``/health`` awaited, its log read when ``--log`` names one),
each batch one survey (its worker is asked when it runs).

Exit codes: 0 every server ready and unflagged and no batch failed or interrupted;
3 a server is not ready or carries a flag; 4 a batch failed or was interrupted (3 wins
when both hold); 2 usage.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import msgspec
from msgspec import UNSET, UnsetType

from eagle_tui.core.accept.live import LiveAcceptance
from eagle_tui.core.argtypes import FileFollowed
from eagle_tui.core.batches.registry import Registry
from eagle_tui.core.batches.survey import BatchView, survey_all
from eagle_tui.core.batchstate import LIVE_STATES, BatchState
from eagle_tui.core.capture.progress import Progress, progress_fields
from eagle_tui.core.errors import BadURL, UntrustedState
from eagle_tui.core.health.acceptance import read_acceptance
from eagle_tui.core.health.assemble import WatchOptions, build_watcher
from eagle_tui.core.health.phase import Phase
from eagle_tui.core.health.snapshot import HealthSnapshot, ServingLoad
from eagle_tui.core.paths import state_dir
from eagle_tui.core.sglang.router import WorkerAccess, look_at
from eagle_tui.core.text import duration, terminal_safe
from eagle_tui.core.urls import ServerURL
from eagle_tui.core.wire import printable_json
from eagle_tui.tui.cli.batch_table import BatchCounts, NoProgress, batch_counts
from eagle_tui.tui.options import server_url
from eagle_tui.tui.render.accept import AcceptanceDoc, acceptance_lines
from eagle_tui.tui.render.router import RouterDoc, router_lines
from eagle_tui.tui.render.server import idle_text

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_SERVER_UNHEALTHY = 3
EXIT_BATCH_BROKEN = 4
BROKEN_BATCH_STATES = frozenset({BatchState.FAILED, BatchState.INTERRUPTED})
LOG_TAIL_BYTES = 1 << 20  # enough decode lines for the acceptance window


class BatchLine(msgspec.Struct, frozen=True, kw_only=True):
    """One batch of the report."""

    id: str
    name: str
    state: BatchState
    out_dir: str
    counts: BatchCounts  # as ``batches --json`` prints them
    detail: str | None


@dataclass(frozen=True)
class _Located:
    url: str  # public: no user info


@dataclass(frozen=True)
class ServerEntry(HealthSnapshot, _Located):
    """One server of the report: its URL, then the fields of its watcher ``HealthSnapshot``
    as they are (inherited: the JSON is one flat object, URL first, as it always was), then
    a router's ``router`` and a speculating server's ``acceptance``, left out when it has
    none."""

    router: RouterDoc | UnsetType = UNSET
    acceptance: AcceptanceDoc | UnsetType = UNSET

    @classmethod
    def of(cls, url: str, snapshot: HealthSnapshot, router: RouterDoc | None = None,
           acceptance: AcceptanceDoc | None = None) -> ServerEntry:
        """The entry of the server at ``url`` (its public form)."""
        return cls(url=url, **{f.name: getattr(snapshot, f.name) for f in fields(snapshot)},
                   router=UNSET if router is None else router,
                   acceptance=UNSET if acceptance is None else acceptance)


class StatusReport(msgspec.Struct, frozen=True, kw_only=True):
    """The ``--json`` document."""

    servers: list[ServerEntry]
    batches: list[BatchLine]
    exit_code: int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``status`` options."""
    parser.add_argument("--url", action="append", default=[], type=server_url, metavar="URL",
                        help="an SGLang server to include (repeat for several)")
    parser.add_argument("--log", action="append", default=[], metavar="FILE",
                        type=FileFollowed("server's log file"),
                        help="log file of the --url in the same position")
    parser.add_argument("--router-metrics", action="append", default=[], type=server_url,
                        metavar="URL",
                        help="a router's Prometheus endpoint (its --prometheus-port), read "
                             "into the router's entry (repeat for several routers)")
    parser.add_argument("--trust-router-workers", action="store_true",
                        help="also ask a router's listed workers directly (health, load), "
                             "sending them the API key; without it only the URLs you name "
                             "are contacted")
    parser.add_argument("--once", action="store_true",
                        help="one snapshot and exit (the default; kept for scripts)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.epilog = (f"exit codes: {EXIT_OK} healthy, {EXIT_SERVER_UNHEALTHY} a server not "
                     f"ready or flagged, {EXIT_BATCH_BROKEN} a batch failed or interrupted, "
                     f"{EXIT_USAGE} usage")


def run(args: argparse.Namespace) -> int:
    """Take the snapshot, print it, exit by health."""
    if len(args.log) > len(args.url):
        print("eagle-tui status: more --log than --url; pair each log with its server",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        report = asyncio.run(collect(args.url, args.log, args.router_metrics,
                                     trust_workers=args.trust_router_workers))
    except UntrustedState as e:  # another user could have planted what we would read
        print(f"eagle-tui status: {terminal_safe(str(e))}", file=sys.stderr)
        return EXIT_USAGE
    print(printable_json(report) if args.json
          else terminal_safe(render_text(report), multiline=True))
    return report.exit_code


async def collect(urls: list[ServerURL], logs: list[Path],
                  router_metrics: list[ServerURL] | None = None, *,
                  trust_workers: bool = False) -> StatusReport:
    """Every known server and batch; a router's entry also lists its workers (``router``),
    asked directly only when named or ``trust_workers``."""
    records = Registry().all()
    views = [view for view in await survey_all(records) if not demo_leftover(view)]
    servers = _known_servers(urls, views)
    access = WorkerAccess(frozenset(servers), listed=trust_workers)
    log_of = dict(zip(urls, logs, strict=False))
    snapshots = await asyncio.gather(*(server_snapshot(u, log_of.get(u), access)
                                       for u in servers))
    routers = await asyncio.gather(*(router_entry(u, router_metrics or [], access)
                                     for u in servers))
    accepts = await asyncio.gather(*(acceptance_entry(u, log_of.get(u))
                                     for u in servers))
    entries = [ServerEntry.of(url.public, snap, router, accept) for url, snap, router, accept
               in zip(servers, snapshots, routers, accepts, strict=True)]
    return StatusReport(servers=entries, batches=[batch_line(view) for view in views],
                        exit_code=_exit_code(list(snapshots), views))


async def server_snapshot(url: ServerURL, log: Path | None,
                          access: WorkerAccess | None = None) -> HealthSnapshot:
    """One watcher tick against ``url`` (URL-only unless a log is given)."""
    options = WatchOptions(url=url, log_path=log, use_history=False, gpu=False,
                           workers=access or WorkerAccess())
    watcher = build_watcher(options)
    try:
        return await watcher.tick(await_health=True)
    finally:
        await watcher.aclose()


async def router_entry(url: ServerURL, metrics_urls: list[ServerURL],
                       access: WorkerAccess | None = None) -> RouterDoc | None:
    """The document of a router URL (its metrics from the ``metrics_urls`` entry on the
    same host), None for anything else."""
    metrics = next((m for m in metrics_urls if m.host == url.host), None)
    view = await look_at(url, metrics_url=metrics,
                         access=access or WorkerAccess())
    if view is None:
        return None
    doc = RouterDoc.of(view)
    if access is None or not access.listed:  # the workers are not asked directly unless trusted
        return doc
    accepts = await asyncio.gather(*(_worker_acceptance(w.url) for w in doc.workers))
    workers = tuple(msgspec.structs.replace(w, acceptance=None if a is None else
                                            AcceptanceDoc.of(a))
                    for w, a in zip(doc.workers, accepts, strict=True))
    return msgspec.structs.replace(doc, workers=workers)


async def _worker_acceptance(listed: str) -> LiveAcceptance | None:
    """A listed worker's acceptance (its URL as ``RouterDoc`` shows it: the public form, or
    a quote of one that is not a server URL, which is not asked)."""
    try:
        url = ServerURL.parse(listed)
    except BadURL:
        return None
    return await read_acceptance(url)


async def acceptance_entry(url: ServerURL, log: Path | None) -> AcceptanceDoc | None:
    """The acceptance of a server that answers ``/server_info``: its speculative config,
    the figure from the best source with its source and window, the 1.00 alarm
    (docs/acceptance.md); None when it does not answer."""
    live = await read_acceptance(url, log_lines=log_tail(log) if log is not None else ())
    return None if live is None else AcceptanceDoc.of(live)


def log_tail(path: Path, limit: int = LOG_TAIL_BYTES) -> list[str]:
    """The last lines of a server log (its recent decode lines), [] when unreadable."""
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, handle.seek(0, 2) - limit))
            return handle.read().decode("utf-8", errors="replace").splitlines()[1:]
    except OSError:
        return []


def demo_leftover(view: BatchView) -> bool:
    """A batch an ``eagle-tui demo`` ran that no longer runs (its demo ended without
    cleaning up): neither it nor its simulated server is anything to report."""
    demo_dir = state_dir() / "demo"
    return Path(view.record.out_dir).is_relative_to(demo_dir) and view.state not in LIVE_STATES


def _known_servers(urls: list[ServerURL], views: list[BatchView]) -> list[ServerURL]:
    known = list(urls)
    for view in views:
        for url in view.record.config.servers:
            if url not in known:
                known.append(url)
    return known


def batch_line(view: BatchView) -> BatchLine:
    """The report's entry of one batch."""
    return BatchLine(id=view.record.id, name=view.record.name, state=view.state,
                     out_dir=view.record.out_dir, counts=batch_counts(view), detail=view.detail)


def _exit_code(snapshots: list[HealthSnapshot], views: list[BatchView]) -> int:
    if any(s.phase != Phase.READY or s.flags for s in snapshots):
        return EXIT_SERVER_UNHEALTHY
    if any(view.state in BROKEN_BATCH_STATES for view in views):
        return EXIT_BATCH_BROKEN
    return EXIT_OK


def render_text(report: StatusReport) -> str:
    """A few human lines: one per server (and per worker of a router), one per batch."""
    lines = []
    for server in report.servers:
        flags = ", ".join(server.flag_names) or "no flags"
        lines.append(f"server {server.url}: {server.phase} ({flags})")
        lines.extend(load_lines(server.load))
        if server.acceptance is not UNSET:
            lines.extend(acceptance_lines(server.acceptance))
        if server.router is not UNSET:
            lines.extend(router_lines(server.router))
            for worker in server.router.workers:
                lines.extend(acceptance_lines(worker.acceptance, f"{worker.url} "))
    lines.extend(batch_text(batch) for batch in report.batches)
    if not lines:
        lines.append("no servers or batches known (pass --url, or start a batch)")
    return "\n".join(lines)


def load_lines(load: ServingLoad | None) -> list[str]:
    """``  load: running 2 · queued 0 · 77 tok/s (log, 3s ago)`` while current, ``  load:
    idle since 14:02:11`` once expired (a log line older than a few decode-log intervals,
    or a server not serving); nothing before any figure."""
    if load is None:
        return []
    if not load.current:
        return [f"  load: {idle_text(load.idle_since)}"]
    parts = [f"running {load.running}"]
    if load.queued is not None:
        parts.append(f"queued {load.queued}")
    if load.throughput is not None:
        parts.append(f"{load.throughput:.0f} tok/s")
    return [f"  load: {' · '.join(parts)} ({load.source}, {duration(load.age_s)} ago)"]


def batch_text(batch: BatchLine) -> str:
    """``batch ID NAME: running  rows 120/400 · failed 2 · 3.1 samples/s · ETA 1m30s``."""
    counts = batch.counts
    head = f"batch {batch.id} {batch.name or ''}".rstrip() + f": {batch.state}"
    if isinstance(counts, NoProgress):
        return f"{head}  (no progress saved yet)"
    done, total = counts.already_done + counts.done, counts.total
    parts = [f"rows {done}/{total}" if total is not None else f"rows {done}"]
    parts += [f"{name} {count}" for name, count in (
        ("failed", counts.failed), ("rejected", counts.rejected), ("flagged", counts.flagged))
        if count]
    if isinstance(counts, Progress):  # rates and ETA: only a worker that answers knows them
        shown = progress_fields(counts)
        if counts.samples_per_s:
            parts.append(f"{shown.samples_per_s} samples/s")
        if counts.eta_s is not None and batch.state == BatchState.RUNNING:
            parts.append(f"ETA {shown.eta}")
    detail = f"  ({batch.detail})" if batch.detail else ""
    return f"{head}  {' · '.join(parts)}{detail}"

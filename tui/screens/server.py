"""The Server view: one card per server and the selected server's log.

Each server's ``ServerFeed`` runs in its own thread worker and posts snapshots and log
batches here; the screen keeps per-server history and log buffers and updates the widgets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.widget import Widget
from textual.widgets import Static
from textual.worker import get_current_worker

from eagle_tui.core.errors import BadURL
from eagle_tui.core.outside import clean
from eagle_tui.core.urls import ServerURL
from eagle_tui.tui.options import ServerTarget
from eagle_tui.tui.render import literal
from eagle_tui.tui.render.accept import AcceptanceReading
from eagle_tui.tui.render.gpu import gpu_lines
from eagle_tui.tui.render.incidents import HOLD_S, IncidentDesk
from eagle_tui.tui.render.server import ServerHistory
from eagle_tui.tui.screens.base import ViewScreen
from eagle_tui.tui.screens.confirm import ConfirmScreen
from eagle_tui.tui.sources.server import DISCOVER_EVERY_S, LogBatch, ServerAction
from eagle_tui.tui.widgets.gpu_panel import GpuPanel
from eagle_tui.tui.widgets.log_pane import HEALTH_NOISE, LogBuffer, LogPane, ServerLog
from eagle_tui.tui.widgets.router_card import RouterWorkers
from eagle_tui.tui.widgets.server_card import ServerCard

if TYPE_CHECKING:
    from eagle_tui.core.health.snapshot import HealthSnapshot
    from eagle_tui.core.proc.orphans import OrphanReport
    from eagle_tui.core.sglang.router import RouterView
    from eagle_tui.tui.sources.server import FeedItem, ServerFeed

HELP = """\
One card per server: its **phase** and time in phase, elapsed start-up time against the
**expected window** (the `│` marks the window; fill past it means a slow start), shard
loading, the phase **timeline** with last start-up's durations in brackets, **flags** with
their evidence, process / port / GPU state, the `/health` latency sparkline and, once
serving, running and queued requests and tokens/s.

Below: the selected server's **log**, newest at the bottom, redrawn once per refresh
period. `/` searches it (a regular expression; lower case ignores case): matches are
highlighted, `n`/`N` jump to the next/previous match, `m` switches between matching lines
only (the default) and every line. `e`/`E` jump to the next/previous error. `j`/`k` scroll,
`g` goes to the top; `f` turns follow on or off (scrolling up turns it off), End or `G`
follow again. `c` folds lines that differ only in their tensor-parallel rank into one
(`TP0-7 … ×8 ranks`, on by default), `w` wraps long lines, `t` hides time stamps, `h` shows
the lines quiet mode hides (our own `/health` polls and progress-bar redraws, which are
never the card's "last log" either). `Esc` leaves the search box.

With several servers, `]` and `[` (or a click on its card, or the palette's "next
server") select the one whose log and GPUs are shown. `s` takes every rank's
Python stack of the selected server with py-spy (its own server process, on this host) and
shows them on its card, folded (`TP0-6 in barrier(); TP7 in load_weights → …`); a stall
takes them by itself. A stalled card says why from the processes: **hung**, **waiting for
peers**, **blocked on I/O**, **stopped**, or **busy** (working without printing: no stall).
A server that is SGLang's router lists its workers on its card (state, the router's load,
running and queued requests); each worker gets a card of its own, watched like any server.
Managed servers (started by eagle-tui) can be restarted (`r`) or stopped (`x`). When a
port conflict or an out-of-memory start is caused by **leftover SGLang processes** of an
earlier run, the flag names them and `o` offers to stop them (SIGTERM, SIGKILL after 15 s;
not with `--readonly`).
Started with no `--url`, the view finds the SGLang servers on this host (and those started
later) in the process table, with the log files their output goes to.

The **GPU panel** (`p` hides or shows it) has one line per GPU of a local server's host:
memory used of total, utilisation, and every process holding memory, marked `server` (the
server or one of its ranks) or `OTHER` (memory still held by a previous server shows
here while a new one starts). Without an NVIDIA driver the card says so instead.
"""

NO_SERVER = (
    "No server to watch. Start the dashboard with --url URL [--log FILE] [--pid PID], "
    "or run `eagle-tui demo`."
)
LOOKING = (
    "No SGLang server found on this host yet; looking every few seconds (launch_server, "
    "sglang serve, the router, eagle-tui sim). Or start the dashboard with --url URL."
)

SNAPSHOT_ACTIONS = ("stop_orphans", "restart_server", "stop_server")
"""The actions whose state a new snapshot can change (see ``action_state``)."""


class FeedMessage(Message):
    """A snapshot or log batch from the feed of server ``index`` (posted from its thread)."""

    def __init__(self, index: int, item: FeedItem) -> None:
        super().__init__()
        self.index = index
        self.item = item


class ServersFound(Message):
    """Servers the discovery found (posted from its thread)."""

    def __init__(self, targets: list[ServerTarget]) -> None:
        super().__init__()
        self.targets = targets


class ServerScreen(ViewScreen):
    """Cards for every server and a log pane."""

    VIEW = "server"
    HELP_TEXT = HELP
    AUTO_FOCUS = "ServerLog"
    MUTATING_ACTIONS = frozenset({"restart_server", "stop_server", "stop_orphans"})
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right_square_bracket", "select_server(1)", "Next server", key_display="]",
                id="server.next"),
        Binding("left_square_bracket", "select_server(-1)", "Prev server", key_display="[",
                id="server.prev"),
        Binding("r", "restart_server", "Restart", id="server.restart"),
        Binding("x", "stop_server", "Stop server", id="server.stop"),
        Binding("p", "toggle_gpus", "GPUs", show=False, id="server.gpus"),
        Binding("s", "dump_stacks", "Stacks", id="server.stacks"),
        Binding("o", "stop_orphans", "Stop leftovers", id="server.orphans"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.selected = 0
        self.histories: list[ServerHistory] = []
        self.buffers: list[LogBuffer] = []
        self._busy: set[int] = set()
        self.desks: list[IncidentDesk] = []
        self.show_gpus = True
        self._last_line: dict[int, tuple[str, float]] = {}
        """Per server, the newest log line that is not our own polling, and when it came."""
        self._pending: dict[int, list[FeedItem]] = {}
        """Feed items received since the last redraw, per server (applied once per refresh:
        over a slow link every redraw costs bytes, so a second's log lines scroll once)."""
        self._cards: dict[int, ServerCard] = {}
        self._stale_cards: set[int] = set()
        """Cards with news that came while another view was shown (drawn on return)."""

    @property
    def feeds(self) -> tuple[ServerFeed, ...]:
        """The feeds of every watched server."""
        return self.eagle.sources.servers

    def compose_body(self) -> ComposeResult:
        self.histories = [ServerHistory() for _ in self.feeds]
        self.desks = [IncidentDesk(feed.target.label) for feed in self.feeds]
        self.buffers = [LogBuffer() for _ in self.feeds]
        # Not focusable: a click on a card selects it and the log keeps the keys.
        with VerticalScroll(id="server-cards", can_focus=False):
            if not self.feeds:
                looking = self.eagle.sources.discovery is not None
                yield Static(LOOKING if looking else NO_SERVER, classes="placeholder", markup=False)
            for index, feed in enumerate(self.feeds):
                self.eagle.fleet.watch(index, feed.target.label, feed.target.url.public)
                yield ServerCard(feed.target, index)
        yield GpuPanel(id="server-gpus")
        yield LogPane(self.buffers[0] if self.buffers else None, id="server-log")

    def main_widget(self) -> Widget | None:
        logs = self.query(ServerLog)
        return logs.first() if logs else None

    def on_mount(self) -> None:
        self.eagle.fleet.watching = True
        self._mark_selected()
        for index, feed in enumerate(self.feeds):
            self._run_feed(index, feed)
        self.set_interval(self.eagle.options.refresh_s, self.apply_pending)
        self.set_interval(HOLD_S / 3, self._toast_incidents)
        if self.eagle.sources.discovery is not None:
            self._discover()

    # -- discovery ---------------------------------------------------------------------------

    @work(thread=True, group="server-discovery", exit_on_error=False)
    def _discover(self) -> None:
        discovery = self.eagle.sources.discovery
        assert discovery is not None
        stop = get_current_worker().cancelled_event
        while not stop.is_set():
            targets = discovery.new_targets()
            if targets:
                self.post_message(ServersFound(targets))
            stop.wait(DISCOVER_EVERY_S)

    @on(ServersFound)
    async def _servers_found(self, message: ServersFound) -> None:
        for placeholder in self.query(".placeholder"):
            await placeholder.remove()
        for target in message.targets:
            index = self._add_server(target)
            if index == 0:
                self.query_one(LogPane).use_buffer(self.buffers[0])
        self._mark_selected()
        self.refresh_bindings()

    def _add_server(self, target: ServerTarget) -> int:
        """Watch one more server (found on the host, or a router's worker): its card, its
        history, log buffer and incident desk, and its feed; the new index."""
        from eagle_tui.tui.sources.server import ServerFeed

        feed = ServerFeed(target, trust_workers=self.eagle.options.trust_router_workers)
        sources = self.eagle.sources
        sources.servers = (*sources.servers, feed)
        index = len(sources.servers) - 1
        self.histories.append(ServerHistory())
        self.buffers.append(LogBuffer())
        self.desks.append(IncidentDesk(target.label))
        self.eagle.fleet.watch(index, target.label, target.url.public)
        self.query_one("#server-cards", VerticalScroll).mount(ServerCard(target, index))
        self._run_feed(index, feed)
        return index

    # -- feeds -------------------------------------------------------------------------------

    @work(thread=True, group="server-feeds", exit_on_error=False)
    def _run_feed(self, index: int, feed: ServerFeed) -> None:
        stop = get_current_worker().cancelled_event

        def emit(item: FeedItem) -> None:
            self.post_message(FeedMessage(index, item))

        try:
            feed.run(stop, emit)
        except Exception as exc:  # the feed guards itself; keep the app up regardless
            emit(LogBatch(error=f"watching stopped: {type(exc).__name__}: {exc}"))

    @on(FeedMessage)
    def _feed_item(self, message: FeedMessage) -> None:
        first = not self.histories[message.index].latest and not self._pending
        self._pending.setdefault(message.index, []).append(message.item)
        if first:  # the first look at a server is shown at once
            self.apply_pending()

    def apply_pending(self) -> None:
        """Show what the feeds sent since the last redraw: every log line (one write per
        server), the newest router view and snapshot."""
        pending, self._pending = self._pending, {}
        with self.app.batch_update():
            for index, items in pending.items():
                self._apply(index, items)

    def _apply(self, index: int, items: list[FeedItem]) -> None:
        from eagle_tui.core.sglang.router import RouterView

        batches = [item for item in items if isinstance(item, LogBatch)]
        if batches:
            last = batches[-1]
            lines = tuple(line for batch in batches for line in batch.lines)
            self._note_last_line(index, lines)
            self._log_batch(index, LogBatch(lines, last.partial, (), last.error))
        views = [item for item in items if isinstance(item, RouterView)]
        if views:
            self.eagle.fleet.servers[index].router = views[-1]
            self._router_view(index, views[-1])
        readings = [item for item in items if isinstance(item, AcceptanceReading)]
        if readings:
            self.eagle.fleet.servers[index].acceptance = readings[-1]
            self._show_card(index)
        snapshots = [item for item in items
                     if not isinstance(item, LogBatch | RouterView | AcceptanceReading)]
        if snapshots:
            self._snapshots(index, snapshots)

    def _router_view(self, index: int, view: RouterView) -> None:
        """Show a router's workers on its card, and give each worker a card of its own."""
        card = self.card(index)
        found = card.query(RouterWorkers)
        workers = found.first() if found else RouterWorkers()
        if not found:
            card.mount(workers)
        workers.show(view)
        if not self.eagle.options.trust_router_workers:
            return  # a card would poll the worker: only when the user trusts the list
        watched = {feed.target.url for feed in self.feeds}
        for worker in view.workers:
            try:
                url = ServerURL.parse(worker.url)
            except BadURL:  # the router lists what it was given: nothing we could watch
                continue
            if url not in watched:
                name = f"{card.target.label} › {url.label}"
                self._add_server(ServerTarget(url=url, name=name))
    def _show_gpus(self, snapshot: HealthSnapshot | None) -> None:
        lines = gpu_lines(snapshot.gpu, snapshot.process) if snapshot is not None else []
        self.query_one(GpuPanel).show_lines(lines, wanted=self.show_gpus)

    def action_toggle_gpus(self) -> None:
        self.show_gpus = not self.show_gpus
        self._show_gpus(self.histories[self.selected].latest if self.histories else None)

    def _note_last_line(self, index: int, lines: tuple[str, ...]) -> None:
        meaningful = [line for line in lines if not HEALTH_NOISE.search(line)]
        if meaningful:
            self._last_line[index] = (meaningful[-1], self.eagle.clock.monotonic())

    def _without_polls(self, index: int, snapshot: HealthSnapshot) -> HealthSnapshot:
        """The snapshot with its "last log" line being the newest one that is not the
        dashboard's own ``/health`` or ``/metrics`` poll (those say nothing of the server)."""
        line = snapshot.last_log_line
        if line is None or not HEALTH_NOISE.search(line):
            return snapshot
        seen = self._last_line.get(index)
        if seen is None:
            return replace(snapshot, last_log_line=None, last_log_age_s=None)
        return replace(snapshot, last_log_line=clean(seen[0]),
                       last_log_age_s=max(0.0, self.eagle.clock.monotonic() - seen[1]))

    def _snapshots(self, index: int, snapshots: list[HealthSnapshot]) -> None:
        """Record every snapshot (latency points, new flags); show the newest."""
        history = self.histories[index]
        new_flags = [flag for snapshot in snapshots for flag in history.record(snapshot)]
        shown = self._without_polls(index, snapshots[-1])
        self.eagle.fleet.servers[index].snapshot = shown
        self._show_card(index)
        if index == self.selected:
            self._show_gpus(shown)
        self.desks[index].add(new_flags, self.eagle.clock.monotonic())
        self._toast_incidents()
        self.refresh_footer_on_change(SNAPSHOT_ACTIONS)

    def card(self, index: int) -> ServerCard:
        """Server ``index``'s card (looked up once: a query walks every card)."""
        card = self._cards.get(index)
        if card is None:
            card = self._cards[index] = self.query_one(f"#server-card-{index}", ServerCard)
        return card

    def _show_card(self, index: int) -> None:
        """Draw a card from what its server last sent; while another view is shown (the
        Fleet view over 64 servers), only remember to: hidden cards redrawn every second
        cost the shown view its frames."""
        if not self.is_current:
            self._stale_cards.add(index)
            return
        entry = self.eagle.fleet.servers[index]
        card = self.card(index)
        if entry.snapshot is not None:
            card.show(entry.snapshot, self.histories[index])
        if entry.acceptance is not None:
            card.show_acceptance(entry.acceptance)

    def on_screen_resume(self) -> None:
        stale, self._stale_cards = self._stale_cards, set()
        for index in sorted(stale):
            self._show_card(index)
        self.refresh_footer_on_change(SNAPSHOT_ACTIONS)


    def _toast_incidents(self) -> None:
        """One toast per incident, naming its root cause (see ``render.incidents``)."""
        now = self.eagle.clock.monotonic()
        for desk, feed in zip(self.desks, self.feeds, strict=False):
            toast = desk.due(now)
            if toast is not None and not feed.target.quiet:
                severity: SeverityLevel = "error" if toast.severity == "error" else "warning"
                self.notify(literal.shown(toast.message), title=literal.shown(toast.title),
                            severity=severity, markup=False, timeout=10)

    def _log_batch(self, index: int, batch: LogBatch) -> None:
        if index != self.selected:
            self.buffers[index].extend(batch.lines)
            return
        pane = self.query_one(LogPane)
        pane.add_lines(batch.lines)
        pane.set_partial(batch.partial)
        pane.set_source_problem(batch.error)

    # -- selection ---------------------------------------------------------------------------

    def action_select_server(self, step: int) -> None:
        if len(self.feeds) > 1:
            self.select_server((self.selected + step) % len(self.feeds))

    @on(ServerCard.Chosen)
    def _card_chosen(self, message: ServerCard.Chosen) -> None:
        message.stop()
        if message.index != self.selected and message.index < len(self.feeds):
            self.select_server(message.index)
        if self.focused is None:  # the click took the focus: give the log its keys back
            self.focus_main()

    def select_server(self, index: int) -> None:
        """Show server ``index``'s log and GPUs (a key, the palette or a click on its card)."""
        self.selected = index
        self._mark_selected()
        pane = self.query_one(LogPane)
        pane.use_buffer(self.buffers[self.selected])
        pane.set_partial("")
        self._show_gpus(self.histories[self.selected].latest)
        self.refresh_bindings()

    def show_server(self, index: int) -> None:
        """Select server ``index`` (the Fleet view's Enter) and scroll its card into view."""
        if 0 <= index < len(self.feeds):
            if index != self.selected:
                self.select_server(index)
            self.card(index).scroll_visible(animate=False)

    def _mark_selected(self) -> None:
        for card in self.query(ServerCard):
            card.set_class(card.index == self.selected and len(self.feeds) > 1, "-selected")

    # -- managed actions ---------------------------------------------------------------------

    def action_state(self, action: str) -> bool | None:
        if action == "select_server":
            return len(self.feeds) > 1
        if action == "stop_orphans":
            return self._selected_orphans() is not None
        if action in ("restart_server", "stop_server"):
            if not self.feeds or not self.feeds[self.selected].can_control:
                return False
            return None if self.selected in self._busy else True
        return True

    @work(group="server-stacks", exclusive=True, exit_on_error=False)
    async def action_dump_stacks(self) -> None:
        """Every rank's Python stack of the selected server (py-spy), on its card and in a
        toast."""
        if not self.feeds:
            return
        feed = self.feeds[self.selected]
        label = feed.target.label
        try:
            result = await asyncio.wrap_future(feed.request_stacks())
        except Exception as exc:
            self.notify(literal.shown(str(exc)), title=literal.shown(f"{label}: no stacks"),
                        severity="warning", markup=False)
            return
        self.notify(literal.shown(result), title=literal.shown(f"{label}: stacks"),
                    markup=False, timeout=15)

    def _selected_orphans(self) -> OrphanReport | None:
        """The leftovers of the selected server's snapshot, when any are the user's own
        (another user's are shown on the card, never offered; zombies neither)."""
        latest = self.histories[self.selected].latest if self.histories else None
        report = latest.orphans if latest is not None else None
        return report if report is not None and report.ours else None

    def action_stop_orphans(self) -> None:
        """Offer to stop the user's own leftover SGLang processes the selected server's flags
        name; each is re-checked (start time, owner, title) at the moment of the stop."""
        report = self._selected_orphans()
        if report is None:
            return
        ours = report.ours
        listed = "\n".join(o.describe() for o in ours[:5])
        theirs = f"\n{len(report.theirs)} of other users: not yours to stop" \
            if report.theirs else ""
        question = (f"Stop {len(ours)} leftover SGLang process(es) of yours?\n{listed}{theirs}"
                    "\n(SIGTERM, SIGKILL after 15 s; a PID that names another process by then "
                    "is left alone)")

        def answered(yes: bool | None) -> None:
            if yes:
                self._stop_orphans(report)

        self.app.push_screen(ConfirmScreen(question, confirm_label="Stop"), answered)

    @work(thread=True, group="server-orphans", exit_on_error=False)
    def _stop_orphans(self, report: OrphanReport) -> None:
        from eagle_tui.core.proc.orphans import stop_orphans

        said = "; ".join(stop_orphans(report))
        self.app.call_from_thread(self.notify, literal.shown(said), title="Leftover processes",
                                  markup=False, timeout=10)

    def action_restart_server(self) -> None:
        self._confirm("restart")

    def action_stop_server(self) -> None:
        self._confirm("stop")

    def _confirm(self, action: ServerAction) -> None:
        index = self.selected
        label = self.feeds[index].target.label
        question = (
            f"Restart {label}? The running server is stopped (SIGTERM, then SIGKILL) and "
            "started again once its port and GPUs are free."
            if action == "restart"
            else f"Stop {label}? In-flight requests are drained, then the process exits."
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._control(index, action)

        self.app.push_screen(ConfirmScreen(question, confirm_label=action.capitalize()), answered)

    @work(group="server-control", exit_on_error=False)
    async def _control(self, index: int, action: ServerAction) -> None:
        label = self.feeds[index].target.label
        self._busy.add(index)
        self.refresh_bindings()
        self.notify(literal.shown(f"{action} requested"), title=literal.shown(label), markup=False)
        try:
            result = await asyncio.wrap_future(self.feeds[index].request(action))
            self.notify(literal.shown(result), title=literal.shown(f"{label}: {action}"),
                        markup=False)
        except Exception as exc:
            self.notify(
                literal.shown(f"{type(exc).__name__}: {exc}"),
                title=literal.shown(f"{label}: {action} failed"),
                severity="error",
                markup=False,
            )
        finally:
            self._busy.discard(index)
            self.refresh_bindings()

    def palette_commands(self) -> Iterable[SystemCommand]:
        if len(self.feeds) > 1:
            yield SystemCommand("Server: next server", "Show the next server's log and GPUs (])",
                                partial(self.action_select_server, 1))
            yield SystemCommand("Server: previous server",
                                "Show the previous server's log and GPUs ([)",
                                partial(self.action_select_server, -1))
        if self.check_action("restart_server", ()):
            yield SystemCommand(
                "Server: restart", "Restart the selected managed server", self.action_restart_server
            )
        if self.check_action("stop_server", ()):
            yield SystemCommand(
                "Server: stop", "Stop the selected managed server", self.action_stop_server
            )
        yield SystemCommand(
            "Server: toggle log follow",
            "Follow the log or stop following",
            self.query_one(LogPane).action_toggle_follow,
        )

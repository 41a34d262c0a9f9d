"""The Streams view: the requests a batch streams live, token by token, highlighted.

A thread worker drains the watched batch's events every refresh period (``--refresh``,
half of it for this view, at most ``MAX_FLUSH_HZ`` a second), folds them into a
``StreamBoard`` (segmenting and decoding there, off the UI thread) and posts one
``StreamsUpdate`` per flush with the streams that changed. The board gives each stream a
slot and keeps it there until it has ended; the screen has one box per slot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static
from textual.worker import get_current_worker

from eagle_tui.tui.render import literal
from eagle_tui.tui.render.batch import BatchSnapshot
from eagle_tui.tui.screens.base import ViewScreen, scroll_edge, scroll_keys, scroll_lines
from eagle_tui.tui.sources.capture import CaptureControl
from eagle_tui.tui.sources.documents import KIMI_BOUNDARIES
from eagle_tui.tui.sources.streams import KEEP_STREAMS, StreamBoard, StreamView
from eagle_tui.tui.sources.tokenizers import SharedTokenizer
from eagle_tui.tui.widgets.stream_box import StreamBox
from eagle_tui.tui.widgets.token_view import TokenLegend

MAX_FLUSH_HZ = 10.0
AUTO_WATCH_S = 1.0
WATCH_COUNT = 8
BOX_MIN_WIDTH = 80
HELP = """\
The requests the selected batch streams live (`w` in the Capture view, or `w` here, asks
it to stream its next 8 requests; every other request is sent without streaming). Opened
with no batch watched (a dashboard started while a batch runs), the view follows the
running batch (the one selected in Capture, else the newest) and asks for 8. Each box
is one request and keeps it from its first token to its end; a finished box makes room for
a new request only when one starts (the box that ended first goes first). While all eight
boxes are still generating, newer requests are not shown.

reasoning (italic), the `‹/think›` end-of-reasoning token (163607), the answer, tool-call
tokens (`‹tools›`, `‹call›`, `‹args›` …) and their arguments (underlined), and the stop token
`‹stop›`, each in its own style. The capture sends prompt ids only, so a stream starts with
the model's first output token, inside reasoning. A box that lost ids (the dashboard fell
behind and the worker dropped events) says so in its title; one whose end was dropped
says `end lost` once the batch is over (its row, if stored, is in the Inspect view).

A finished box's title ends with the request's acceptance when the server speculates
(`accept 3.20 · rate 0.73 · 12 verify steps · P(>=j) 0.92 0.75 0.40`); `i` opens the batch in
the Inspect view, where the stored row shows the same line (`/` finds it by its sample id).

`t` switches every box between decoded text and raw token ids; `a` keeps 8 requests
streaming (it asks for more as watched ones end); `j`/`k` scroll, `g`/`G` top and bottom.
"""


@dataclass
class TokenizerLoad:
    """A tokenizer being loaded off the streams thread."""

    done: threading.Event = field(default_factory=threading.Event)
    tokenizer: SharedTokenizer | None = None
    why: str = ""


class StreamsUpdate(Message):
    """The streams that changed in one flush (posted from the worker thread)."""

    def __init__(
        self,
        batch_id: str,
        views: tuple[StreamView, ...],
        note: str = "",
        *,
        live: int = 0,
        seen: int = 0,
    ) -> None:
        super().__init__()
        self.batch_id = batch_id
        self.views = views
        self.note = note
        self.live = live
        self.seen = seen


class StreamsScreen(ViewScreen):
    """Live token streams of the watched batch."""

    VIEW = "streams"
    HELP_TEXT = HELP
    # Textual types it as an instance attribute (ClassVar[...] | None), so no ClassVar here.
    HORIZONTAL_BREAKPOINTS = [  # noqa: RUF012
        (0, "-one-column"), (BOX_MIN_WIDTH * 2, "-two-columns"),
        (BOX_MIN_WIDTH * 3, "-three-columns"),
    ]
    """Boxes side by side when each can still be ``BOX_MIN_WIDTH`` wide (tcss: the grid)."""
    MUTATING_ACTIONS = frozenset({"watch_more", "toggle_auto"})
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("t", "toggle_mode", "Text/ids", id="streams.mode"),
        Binding("w", "watch_more", "Watch 8 more", id="streams.watch"),
        Binding("a", "toggle_auto", "Keep 8 live", id="streams.auto"),
        Binding("i", "inspect", "Inspect", id="streams.inspect"),
        *scroll_keys("streams", top="g,home", bottom="G,end"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.boxes: dict[str, StreamBox] = {}
        """The box showing each stream on screen, by sample id."""
        self.slots: list[StreamBox] = []
        """One box per board slot, in slot order."""
        self._requested = 0
        self._seen = 0
        self._live = 0
        self.mode = "text"
        self.batch_id: str | None = None
        self._note = ""
        self._tokenizer_name = ""

    @property
    def control(self) -> CaptureControl | None:
        """The capture interface."""
        return self.eagle.sources.capture

    def compose_body(self) -> ComposeResult:
        yield Static(
            "no batch is being watched: press w in the Capture view",
            id="streams-status",
            markup=False,
        )
        yield TokenLegend()
        yield VerticalScroll(id="streams-grid")

    def on_mount(self) -> None:
        if self.control is not None:
            self._follow_running()
            self._follow_streams(self.control)
            self.set_interval(AUTO_WATCH_S, self._tick)

    def _tick(self) -> None:
        self._follow_running()
        self._top_up()
        self._show_status()

    def _follow_running(self) -> None:
        """Nothing watched yet (a dashboard started while batches run): follow the running
        batch, the one selected in Capture first, else the newest, and ask it for 8 streams
        (unless read-only: then its streams show only when something else asks)."""
        control = self.control
        if control is None or self.eagle.watching is not None:
            return
        live = [snapshot for snapshot in control.batches() if snapshot.live]
        if not live:
            return
        selected = [s for s in live if s.out_dir == self.eagle.selected_batch]
        batch_id = (selected or live)[-1].batch_id
        self.eagle.watching = batch_id
        if not self.eagle.options.readonly:
            control.watch(batch_id, WATCH_COUNT)

    def _top_up(self) -> None:
        """With "keep 8 live" on, ask the batch to stream more as watched requests end."""
        control, batch_id = self.control, self.eagle.watching
        if not self.eagle.auto_watch or control is None or batch_id is None:
            return
        snapshot = _find(control.batches(), batch_id)
        if snapshot is None or not snapshot.live:
            return
        outstanding = max(0, self._requested - self._seen)
        wanted = KEEP_STREAMS - self._live - outstanding
        if wanted > 0:
            control.watch(batch_id, wanted)
            self._requested += wanted

    # -- the worker --------------------------------------------------------------------------

    def flush_s(self) -> float:
        """How often the streams are redrawn: half the refresh period, at most 10 a second."""
        return max(1.0 / MAX_FLUSH_HZ, self.eagle.options.refresh_s / 2)

    @work(thread=True, group="streams", exit_on_error=False)
    def _follow_streams(self, control: CaptureControl) -> None:
        stop = get_current_worker().cancelled_event
        board: StreamBoard | None = None
        batch_id: str | None = None
        loading: TokenizerLoad | None = None
        while not stop.wait(self.flush_s()):
            try:
                wanted = self.eagle.watching
                if wanted != batch_id:
                    batch_id, board = wanted, StreamBoard(KIMI_BOUNDARIES)
                    loading = self._start_tokenizer_load(control, batch_id)
                    if batch_id is not None:
                        self.post_message(StreamsUpdate(batch_id, ()))
                if batch_id is None or board is None:
                    continue
                if loading is not None and loading.done.is_set():
                    self._use_tokenizer(board, batch_id, loading)
                    loading = None
                views = board.apply(control.take_events(batch_id))
                if board.live and self._batch_over(control, batch_id):
                    views += board.end_lost()
                if views:
                    self.post_message(
                        StreamsUpdate(batch_id, views, live=board.live, seen=board.seen)
                    )
            except Exception as exc:  # keep following; show what went wrong
                self.post_message(StreamsUpdate(batch_id or "", (), f"streams: {exc}"))
                time.sleep(1.0)

    @staticmethod
    def _batch_over(control: CaptureControl, batch_id: str) -> bool:
        """The batch has ended and every event of it has been taken: a box still streaming
        lost its end."""
        snapshot = _find(control.batches(), batch_id)
        return snapshot is not None and not snapshot.live and not control.following(batch_id)

    def _start_tokenizer_load(
        self, control: CaptureControl, batch_id: str | None
    ) -> TokenizerLoad | None:
        """Load the batch's tokenizer in the background: streams show raw ids meanwhile
        (a first load imports transformers: seconds)."""
        cache = self.eagle.sources.tokenizers
        snapshot = _find(control.batches(), batch_id)
        path = snapshot.tokenizer if snapshot is not None else None
        if cache is None or path is None:
            return None
        load = TokenizerLoad()

        def run() -> None:
            try:
                load.tokenizer, load.why = cache.try_load(path)
            finally:
                load.done.set()

        # called on the streams thread: a worker is started on the UI's loop
        self.app.call_from_thread(self.run_worker, run, thread=True, group="streams-tokenizer",
                                  exit_on_error=False)
        return load

    def _use_tokenizer(self, board: StreamBoard, batch_id: str, load: TokenizerLoad) -> None:
        tokenizer = load.tokenizer
        if tokenizer is None:
            self.post_message(StreamsUpdate(batch_id, (), f"no tokenizer ({load.why})"))
            return
        board.use_tokenizer(tokenizer, tokenizer.boundary_ids())
        self._tokenizer_name = tokenizer.name
        self.post_message(StreamsUpdate(batch_id, board.views(), live=board.live, seen=board.seen))

    # -- updates -----------------------------------------------------------------------------

    @on(StreamsUpdate)
    def _streams_update(self, message: StreamsUpdate) -> None:
        if message.note:
            self._note = message.note
        if message.batch_id != self.batch_id:
            self._reset(message.batch_id)
        if message.views:
            self._live, self._seen = message.live, message.seen
        grid = self.query_one("#streams-grid", VerticalScroll)
        with self.app.batch_update():
            for view in message.views:
                self._show(grid, view)
        self._show_status()

    def _reset(self, batch_id: str) -> None:
        self.batch_id = batch_id
        for box in self.slots:
            box.remove()
        self.slots.clear()
        self.boxes.clear()
        self._requested = self._seen = self._live = 0

    def _show(self, grid: VerticalScroll, view: StreamView) -> None:
        """Show ``view`` in the box of its slot (boxes are made once per slot and reused:
        no layout pass while streams come and go)."""
        while len(self.slots) <= view.slot:
            box = StreamBox(view)
            self.slots.append(box)
            grid.mount(box)
            self._apply_mode(box)
        box = self.slots[view.slot]
        if box.sample_id != view.sample_id:
            self.boxes.pop(box.sample_id, None)
        box.show(view)
        self.boxes[view.sample_id] = box

    def status_text(self) -> str:
        """``batch B · running · 8 shown, 5 generating · keeping 8 live · decoded with T``:
        the batch's state now, and how the boxes are drawn now."""
        snapshot = _find(self.control.batches(), self.batch_id) if self.control else None
        if self.batch_id is None:
            return "no batch is being watched: press w in the Capture view"
        parts = [f"batch {self.batch_id}"]
        if snapshot is not None:
            parts.append(str(snapshot.state))
        parts.append(f"{len(self.boxes)} shown, {self._live} generating")
        if self.eagle.auto_watch and snapshot is not None and snapshot.live:
            parts.append(f"keeping {KEEP_STREAMS} live")
        parts.append(self._mode_text())
        if self._note:
            parts.append(self._note)
        return " · ".join(parts)

    def _mode_text(self) -> str:
        if self.mode == "ids":
            return "raw ids (t: text)"
        if self._tokenizer_name:
            return f"decoded with {self._tokenizer_name}"
        return "raw ids: no tokenizer" if self._note else "raw ids until the tokenizer loads"

    def _show_status(self) -> None:
        self.query_one("#streams-status", Static).update(literal.content(self.status_text()))

    # -- actions -----------------------------------------------------------------------------

    def main_widget(self) -> Widget | None:
        return self.query_one("#streams-grid", VerticalScroll)

    def action_scroll(self, step: int) -> None:
        scroll_lines(self.query_one("#streams-grid", VerticalScroll), step)

    def action_edge(self, end: int) -> None:
        scroll_edge(self.query_one("#streams-grid", VerticalScroll), end)

    def action_toggle_mode(self) -> None:
        self.mode = "ids" if self.mode == "text" else "text"
        for box in self.slots:
            self._apply_mode(box)
        self._show_status()

    def _apply_mode(self, box: StreamBox) -> None:
        box.tokens.mode = "ids" if self.mode == "ids" else "text"

    def action_state(self, action: str) -> bool | None:
        if action == "inspect":
            return self.batch_id is not None
        if action == "watch_more":
            if self.control is None:
                return False
            snapshot = _find(self.control.batches(), self.eagle.watching)
            return True if snapshot is not None and snapshot.live else None
        return True

    def action_inspect(self) -> None:
        """Open the watched batch in the Inspect view: a finished request's row is there with
        its acceptance (from the worker's recent rows until the batch writes a shard)."""
        snapshot = _find(self.control.batches(), self.batch_id) if self.control else None
        if snapshot is not None:
            self.eagle.inspect(snapshot.out_dir)

    def action_toggle_auto(self) -> None:
        self.eagle.auto_watch = not self.eagle.auto_watch
        state = "on" if self.eagle.auto_watch else "off"
        self.notify(literal.shown(f"keep {KEEP_STREAMS} streams live: {state}"), markup=False)
        self._show_status()

    def action_watch_more(self) -> None:
        if self.control is not None and self.eagle.watching is not None:
            self.control.watch(self.eagle.watching, WATCH_COUNT)

    def palette_commands(self) -> Iterable[SystemCommand]:
        yield SystemCommand(
            "Streams: text or ids", "Switch decoded text and raw ids", self.action_toggle_mode
        )


def _find(batches: Iterable[BatchSnapshot], batch_id: str | None) -> BatchSnapshot | None:
    return next((b for b in batches if b.batch_id == batch_id), None)

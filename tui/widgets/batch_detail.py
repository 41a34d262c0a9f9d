"""The selected batch: progress bar, rate sparklines, counts, failures and flags, servers."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from eagle_tui.tui.render import capture as text
from eagle_tui.tui.render import literal
from eagle_tui.tui.render.batch import BatchSnapshot
from eagle_tui.tui.widgets.meter import Meter


class RateSpark(Widget):
    """Recent rates as one line of bars from 0 to their largest (flat at zero)."""

    values: reactive[tuple[float, ...]] = reactive(())

    def render(self) -> Content:
        return literal.content(text.sparkline(self.values, self.size.width))


class BatchDetail(Vertical):
    """Everything about one batch; ``show`` updates it in place."""

    def compose(self) -> ComposeResult:
        yield Static("no batch selected", classes="batch-title", markup=False)
        yield Meter(classes="batch-progress")
        with Horizontal(classes="batch-rates"):
            yield Static("samples/s", classes="rate-label", markup=False)
            yield RateSpark(classes="rate-samples")
            yield Static("tokens/s", classes="rate-label", markup=False)
            yield RateSpark(classes="rate-tokens")
        yield Static("", classes="batch-counts", markup=False)
        yield Static("", classes="batch-failures", markup=False)
        yield Static("", classes="batch-flags", markup=False)
        yield Static("", classes="batch-servers", markup=False)
        yield Static("", classes="batch-error", markup=False)

    def show(self, snapshot: BatchSnapshot, history: text.BatchHistory) -> None:
        """Update every line from ``snapshot`` and the batch's rate history."""
        name = f" ({snapshot.name})" if snapshot.name else ""
        title = f"{snapshot.batch_id}{name} · {snapshot.state} · {snapshot.out_dir}"
        self._set("batch-title", title)
        self.query_one(".batch-progress", Meter).value = text.progress_meter(snapshot)
        self.query_one(".rate-samples", RateSpark).values = tuple(history.samples_per_s)
        self.query_one(".rate-tokens", RateSpark).values = tuple(history.tokens_per_s)
        p = snapshot.progress
        self._set("batch-counts", text.counts_text(
            p.counts, stored_tokens=snapshot.stored_tokens, live=snapshot.live) if p else "")
        failures = text.kinds_text("failures", p.failures, p.counts.failed) if p else ""
        self._set("batch-failures", failures)
        self._set("batch-flags", text.kinds_text("flags", p.flags, p.counts.flagged)
                  if p else "")
        self._set("batch-servers", text.servers_line(snapshot))
        self._set("batch-error", text.batch_note(snapshot.state, snapshot.error))
        self.query_one(".batch-error").display = bool(snapshot.error)

    def _set(self, name: str, value: str) -> None:
        self.query_one(f".{name}", Static).update(literal.content(value))

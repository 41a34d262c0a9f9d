"""One server at a glance: phase, window bar, shards, timeline, flags, process, health, log.

``ServerCard.show`` takes the newest ``HealthSnapshot`` and the server's ``ServerHistory``
and updates each line in place (no recompose), all as literal text. A line whose text did
not change is not touched: with 64 cards, every needless update is a refresh and a layout
on the UI thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Sparkline, Static

from eagle_tui.tui.options import ServerTarget
from eagle_tui.tui.render import literal
from eagle_tui.tui.render import server as text
from eagle_tui.tui.render.accept import AcceptanceReading, acceptance_text, alarm_text
from eagle_tui.tui.render.meter import MeterValue
from eagle_tui.tui.widgets.flags import FlagEvidence
from eagle_tui.tui.widgets.meter import Meter

if TYPE_CHECKING:
    from eagle_tui.core.health.snapshot import HealthSnapshot

TONES = ("ok", "busy", "warn", "bad")
PartT = TypeVar("PartT", bound=Widget)


class ServerCard(Vertical):
    """The card of one server (``index`` in the dashboard's server list); a click chooses it."""

    class Chosen(Message):
        """The card was clicked: show this server's log."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, target: ServerTarget, index: int) -> None:
        super().__init__(id=f"server-card-{index}", classes="server-card")
        self.target = target
        self.index = index
        self.snapshot: HealthSnapshot | None = None
        self.reading: AcceptanceReading | None = None
        self._parts: dict[str, Widget] = {}
        self._texts: dict[str, Content] = {}

    def compose(self) -> ComposeResult:
        with Horizontal(classes="card-title"):
            yield Static(literal.content(self.target.label), classes="card-name")
            yield Static(literal.content(self.target.url.public), classes="card-url")
            if self.target.managed:
                yield Static("managed", classes="card-managed", markup=False)
        yield Static(
            "waiting for the first look at this server…", classes="card-phase", markup=False
        )
        yield Meter(classes="card-window")
        yield Meter(classes="card-shards")
        yield Static("", classes="card-timeline", markup=False)
        flags = FlagEvidence(classes="card-flags")
        flags.display = False
        yield flags
        yield Static("", classes="card-proc", markup=False)
        yield Static("", classes="card-evidence", markup=False)
        with Horizontal(classes="card-health"):
            yield Sparkline([], summary_function=max, classes="card-latency")
            yield Static("", classes="card-health-text", markup=False)
        with Horizontal(classes="card-accept") as accept:
            accept.display = False  # until the server is seen speculating
            yield Sparkline([], summary_function=max, classes="card-accept-spark")
            yield Static("", classes="card-accept-text", markup=False)
        alarm = Static("", classes="card-accept-alarm", markup=False)
        alarm.display = False
        yield alarm
        yield Static("", classes="card-lastlog", markup=False)
        yield Static("", classes="card-notes", markup=False)

    def on_click(self) -> None:
        self.post_message(self.Chosen(self.index))

    def show(self, snapshot: HealthSnapshot, history: text.ServerHistory) -> None:
        """Update every line from ``snapshot`` (and the latency history)."""
        self.snapshot = snapshot
        self._set_phase(snapshot)
        self._typed("card-window", Meter).value = text.window_meter(snapshot)
        self._set_shards(text.shards_meter(snapshot))
        self._set("card-timeline", self._timeline(snapshot))
        flags = self._typed("card-flags", FlagEvidence)
        flags.set_flags(text.flag_pairs(snapshot.flags))
        flags.display = bool(snapshot.flags)
        proc = " · ".join(
            (
                text.process_text(snapshot.process),
                text.port_text(snapshot.port),
                text.gpu_text(snapshot.gpu),
            )
        )
        self._set("card-proc", literal.content(proc))
        evidence = text.evidence_text(snapshot)
        self._set("card-evidence", literal.content(evidence))
        self._part("card-evidence").display = bool(evidence)
        self._typed("card-latency", Sparkline).data = list(history.latencies_ms)
        health = " · ".join(p for p in (text.health_text(snapshot), text.load_text(snapshot)) if p)
        self._set("card-health-text", literal.content(health))
        self._set("card-lastlog", literal.content(text.last_log_text(snapshot)))
        notes = text.notes_text(snapshot)
        self._set("card-notes", literal.content(notes))
        self._part("card-notes").display = bool(notes)

    def show_acceptance(self, reading: AcceptanceReading) -> None:
        """The live accept length (source and window named) with its sparkline, and the
        1.00 alarm when it is raised."""
        self.reading = reading
        self._part("card-accept").display = True
        self._typed("card-accept-spark", Sparkline).data = list(reading.history)
        self._set("card-accept-text", literal.content(acceptance_text(reading)))
        alarm = alarm_text(reading)
        self._set("card-accept-alarm", literal.content(alarm))
        self._part("card-accept-alarm").display = bool(alarm)

    def _part(self, name: str) -> Widget:
        """The child with class ``name`` (looked up once: a query matches every child)."""
        part = self._parts.get(name)
        if part is None:
            part = self._parts[name] = self.query_one(f".{name}")
        return part

    def _typed(self, name: str, kind: type[PartT]) -> PartT:
        part = self._part(name)
        assert isinstance(part, kind)
        return part

    def _set(self, name: str, content: Content) -> None:
        if self._texts.get(name) == content:
            return
        self._texts[name] = content
        self._typed(name, Static).update(content)  # literal: built by callers

    def _set_phase(self, snapshot: HealthSnapshot) -> None:
        phase = self._typed("card-phase", Static)
        tone = text.phase_tone(snapshot.phase)
        for other in TONES:
            phase.set_class(other == tone, f"-{other}")
        self._set("card-phase", literal.content(text.phase_line(snapshot)))

    def _set_shards(self, value: MeterValue | None) -> None:
        meter = self._typed("card-shards", Meter)
        meter.display = value is not None
        if value is not None:
            meter.value = value

    @staticmethod
    def _timeline(snapshot: HealthSnapshot) -> Content:
        parts: list[str | tuple[str, str]] = []
        for number, (label, current) in enumerate(text.timeline_parts(snapshot)):
            if number:
                parts.append(" › ")
            parts.append((label, "bold") if current else label)
        return literal.assemble(*parts) if parts else Content("no phase timeline yet")

"""Start-up history: every completed start-up, and the expectations learned from it.

Records are JSON lines in ``<state dir>/startup-history.jsonl``, one ``StartupRecord``
struct each: signature, when it finished, total seconds, seconds per phase, the longest log
silence per phase and per step, and the outcome (ready, crashed, stalled, stopped). Only
start-ups whose beginning was seen are recorded (launched or watched from the start, or
dated from the log), never an attach to a server that was already up. The expected window
for a signature is the slowest of its recent *ready* start-ups times a margin; a step's
stall limit is its longest recent silence times a margin. With no history the configured
defaults apply (600 s window, the corpus-derived step limits).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from msgspec import UNSET, UnsetType

from eagle_tui.core.errors import UnfitFile
from eagle_tui.core.fsio import MIB, read_small, write_atomic
from eagle_tui.core.health import timings
from eagle_tui.core.health.phase import STARTUP_PHASES, Phase
from eagle_tui.core.health.settings import WatchSettings
from eagle_tui.core.health.snapshot import Expectation
from eagle_tui.core.health.steps import Step
from eagle_tui.core.paths import state_dir
from eagle_tui.core.text import counted
from eagle_tui.core.wire import ENCODER

HISTORY_FILE = "startup-history.jsonl"
_MAX_LINES = 2000  # beyond this the file is compacted to its newest half
MAX_HISTORY_BYTES = 16 * MIB  # 2000 records of a few hundred bytes, with room


class StartupRecord(msgspec.Struct, frozen=True):
    """One completed start-up; durations are kept to the millisecond. (Built positionally by
    the watcher, so not keyword-only.)"""

    signature: str
    finished_at: float
    total_s: float
    phases: dict[str, float] = {}
    max_gaps: dict[str, float] = {}
    outcome: str = "ready"  # older records held ready ones only
    step_gaps: dict[str, float] = {}
    server_timings: dict[str, float] | UnsetType = UNSET
    """SGLang's own figures (``core.health.timings``: ``load_weight``, ``cuda_graph``…);
    unset, so not written, when the server gave none (older records read the same)."""

    def __post_init__(self) -> None:
        set_field = msgspec.structs.force_setattr
        set_field(self, "total_s", round(self.total_s, 3))
        for name in ("phases", "max_gaps", "step_gaps"):
            set_field(self, name, {k: round(v, 3) for k, v in getattr(self, name).items()})
        if not isinstance(self.server_timings, UnsetType):
            set_field(self, "server_timings",
                      {k: round(v, 3) for k, v in self.server_timings.items()})

    @property
    def own_timings(self) -> dict[str, float]:
        """The server's own figures, empty when it gave none."""
        return {} if isinstance(self.server_timings, UnsetType) else self.server_timings


@dataclass(frozen=True)
class Expectations:
    """What to expect of the next start-up of one signature."""

    expectation: Expectation
    stall_limits: Mapping[Phase, float]
    stall_sources: Mapping[Phase, str]
    step_limits: Mapping[Step, float] = field(default_factory=dict)
    step_sources: Mapping[Step, str] = field(default_factory=dict)


class StartupHistory:
    """The history file; unreadable or corrupt lines are skipped, never fatal."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else state_dir() / HISTORY_FILE
        self.problem: str | None = None

    def records(self, signature: str, *, limit: int = 10) -> list[StartupRecord]:
        """The newest ``limit`` records of ``signature``, oldest first."""
        found = [r for r in self._load() if r.signature == signature]
        return found[-limit:]

    def append(self, record: StartupRecord) -> None:
        """Add a record (once: the same start-up seen again is skipped); a write failure is
        remembered in ``problem``, not raised."""
        if self._already_recorded(record):
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "ab") as out:
                out.write(ENCODER.encode(record) + b"\n")
            self._compact_if_large()
        except OSError as exc:
            self.problem = f"cannot write start-up history {self.path}: {exc}"

    def _already_recorded(self, record: StartupRecord) -> bool:
        # Dated from the log, the same start-up seen by two watches finishes at the same time.
        return any(
            r.signature == record.signature
            and abs(r.finished_at - record.finished_at) < 2.0
            and abs(r.total_s - record.total_s) < 2.0
            for r in self.records(record.signature, limit=50)
        )

    def expectations(self, signature: str | None, settings: WatchSettings) -> Expectations:
        """Expected window and stall limits for ``signature`` (defaults without history)."""
        found = self.records(signature, limit=5 * settings.history_size) if signature else []
        ready = [r for r in found if r.outcome == "ready"]
        return expectations_from(ready[-settings.history_size :], settings)

    def _load(self) -> list[StartupRecord]:
        try:
            text = read_small(self.path, MAX_HISTORY_BYTES, "start-up history").decode(
                "utf-8", errors="replace")
        except FileNotFoundError:
            return []
        except UnfitFile as exc:
            self.problem = str(exc)
            return []
        except OSError as exc:
            self.problem = f"cannot read start-up history {self.path}: {exc}"
            return []
        records = []
        for line in text.splitlines():
            try:
                records.append(_DECODER.decode(line))
            except msgspec.DecodeError:
                continue
        return records

    def _compact_if_large(self) -> None:
        data = read_small(self.path, MAX_HISTORY_BYTES, "start-up history")
        lines = data.decode("utf-8", errors="replace").splitlines()
        if len(lines) <= _MAX_LINES:
            return
        kept = "\n".join(lines[-_MAX_LINES // 2 :]) + "\n"
        write_atomic(self.path, kept.encode("utf-8"))


_DECODER = msgspec.json.Decoder(StartupRecord)


def expectations_from(recent: list[StartupRecord], settings: WatchSettings) -> Expectations:
    """Expectations from records of one signature (empty: the defaults)."""
    limits = {p: settings.stall_limit(p) for p in STARTUP_PHASES}
    sources = dict.fromkeys(STARTUP_PHASES, "default")
    if not recent:
        default = Expectation(settings.default_window_s, "default: no earlier start-up")
        return Expectations(default, limits, sources)
    slowest, how = _slowest(recent)
    for phase in STARTUP_PHASES:
        gaps = [r.max_gaps[phase.value] for r in recent if phase.value in r.max_gaps]
        if phase in settings.stall_limits_s:
            continue
        if gaps:
            limits[phase] = max(settings.min_stall_s, max(gaps) * settings.stall_margin)
            sources[phase] = f"history of {counted(len(gaps), 'start-up')}"
            continue
        own = _server_phase_limit(recent, phase, settings)
        if own is not None:
            limits[phase], sources[phase] = own
    step_limits, step_sources = _learned_steps(recent, settings)
    expectation = Expectation(
        window_s=slowest * settings.window_margin,
        source=f"history: slowest of {counted(len(recent), 'start-up')} was {slowest:.0f} s{how}",
        starts_recorded=len(recent),
        typical_phase_s=_typical_phases(recent),
    )
    return Expectations(expectation, limits, sources, step_limits, step_sources)


def _slowest(recent: list[StartupRecord]) -> tuple[float, str]:
    """The slowest start-up: our own measure, or SGLang's own end-to-end figure when that is
    longer (it starts at the engine's launch, which a watch attached later does not see)."""
    ours = max(r.total_s for r in recent)
    own = [e for r in recent if (e := timings.end_to_end(r.own_timings)) is not None]
    if own and max(own) > ours:
        return max(own), ", by SGLang's own startup timings"
    return ours, ""


def _server_phase_limit(
    recent: list[StartupRecord], phase: Phase, settings: WatchSettings
) -> tuple[float, str] | None:
    """A phase's limit from SGLang's own figure for it, when no silence was learned (the
    log's lines were not seen): the whole phase may pass silently."""
    names = [n for n, p in timings.PHASE_FIGURES.items() if p == phase]
    figures = [r.own_timings[n] for r in recent for n in names if n in r.own_timings]
    if not figures:
        return None
    limit = max(settings.min_stall_s, max(figures) * settings.stall_margin)
    return limit, f"SGLang's own {names[0]} timing over {counted(len(figures), 'start-up')}"


def _learned_steps(
    recent: list[StartupRecord], settings: WatchSettings
) -> tuple[dict[Step, float], dict[Step, str]]:
    limits: dict[Step, float] = {}
    sources: dict[Step, str] = {}
    for step in Step:
        gaps = [r.step_gaps[step.value] for r in recent if step.value in r.step_gaps]
        if gaps:
            limits[step] = max(settings.min_stall_s, max(gaps) * settings.stall_margin)
            sources[step] = f"history of {counted(len(gaps), 'start-up')}"
    return limits, sources


def _typical_phases(recent: list[StartupRecord]) -> tuple[tuple[Phase, float], ...]:
    """The median duration of each phase: SGLang's own figure where it reported one."""
    typical = []
    for phase in STARTUP_PHASES:
        names = [n for n, p in timings.PHASE_FIGURES.items() if p == phase]
        own = [r.own_timings[n] for r in recent for n in names if n in r.own_timings]
        values = sorted(own or (r.phases[phase.value] for r in recent if phase.value in r.phases))
        if values:
            typical.append((phase, values[len(values) // 2]))
    return tuple(typical)

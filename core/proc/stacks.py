"""Say where each rank is from its Python stack, and fold ranks that are in the same place.

``classify(dump)`` walks the main thread's frames from the innermost out: the first frame
the catalogue (:mod:`stuckpoints`) knows is the stuck point, the start-up steps passed on
the way out give its path (``load_weights → reading weights (safetensors)``), and a
loader's locals name the file (``st_file``). When the main thread only waits on another
thread (``Thread.join``, a future) the busiest other thread that the catalogue knows is
used instead. A sleeping process whose frames the catalogue does not know is "sleeping in a
retry loop" when its wait (``/proc/PID/syscall``) is a sleep.

``fold`` groups ranks with the same place: ``TP0-6 in barrier(); TP7 in load_weights →
reading weights (safetensors) model-00012-of-00064.safetensors``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from eagle_tui.core.outside import clean
from eagle_tui.core.proc import pyspy
from eagle_tui.core.proc.evidence import State, TreeEvidence
from eagle_tui.core.proc.pyspy import DumpStatus, Frame, StackDump, ThreadStack
from eagle_tui.core.proc.stuckpoints import IMPORTING, Entry, Point, phase_of, point_of
from eagle_tui.core.proc.titles import Kind

# locals that name the file a stuck frame works on: SGLang's weight iterators (st_file),
# filelock (lock_filename, canonical_path), torch.load (f), hub downloads (repo_id)
_FILE_LOCALS = (
    "st_file", "bin_file", "filename", "file", "path", "checkpoint_file", "lock_file",
    "lock_filename", "canonical_path", "lock_path", "model_path", "repo_id",
)  # fmt: skip
_SLEEP_SYSCALLS = frozenset({"nanosleep", "clock_nanosleep"})
_RANK = re.compile(r"^(.*?)(\d+)$")


@dataclass(frozen=True)
class Place:
    """Where one process is: a catalogue point (or ``UNKNOWN``), in words, with the start-up
    steps on the way (``path``), the innermost meaningful frame and a detail (a file)."""

    point: Point
    words: str
    waiting: bool
    stuck: bool
    path: tuple[str, ...] = ()
    frame: Frame | None = None
    detail: str = ""
    thread: str = ""

    @property
    def function(self) -> str:
        """The innermost meaningful function (``barrier``), or ``?``."""
        return self.frame.function.rsplit(".", 1)[-1] if self.frame else "?"

    def describe(self) -> str:
        """``load_weights → reading weights (safetensors) model.safetensors, in
        safetensors_weights_iterator (weight_utils.py:1177)``."""
        words, frame = self.words, self.frame
        if self.point is Point.COLLECTIVE:
            words, frame = f"{self.function}()", None
        elif self.point is Point.UNKNOWN and frame is not None:
            # the frame is all we know: named first, so "TP0 in <module> (…), a place …"
            words, frame = f"{frame.describe()}, {words}", None
        text = " → ".join((*self.path, words))
        if self.detail:
            text += f" {self.detail}"
        if frame is not None:
            text += f", in {frame.describe()}"
        return text

    @property
    def key(self) -> tuple[object, ...]:
        """Two ranks with equal keys are in the same place."""
        where = None if self.frame is None else (self.frame.function, self.frame.short)
        return (self.point, self.words, self.path, where, self.detail)


@dataclass(frozen=True)
class RankPlace:
    """A process's label (``TP3``), PID and place; ``failure`` when no stack was taken."""

    label: str
    pid: int
    place: Place | None
    failure: str = ""


@dataclass(frozen=True)
class Fold:
    """Ranks in the same place, their labels compressed (``TP0-6``)."""

    labels: str
    pids: tuple[int, ...]
    place: Place | None
    failure: str = ""

    def describe(self) -> str:
        """``TP0-6 in barrier()`` / ``TP7: no stack (no permission …)``."""
        if self.place is None:
            return f"{self.labels}: no stack ({self.failure})"
        return f"{self.labels} in {self.place.describe()}"


def classify(dump: StackDump, wait_syscall: str | None = None) -> Place | None:
    """Where the dumped process is; None when the dump failed. ``wait_syscall`` is the
    call its main thread is blocked in, when known (see ``blocked.look``)."""
    if dump.status is not DumpStatus.OK:
        return None
    main = dump.main
    if main is None:
        return Place(Point.UNKNOWN, "a process with no Python threads", False, False)
    place = place_of_thread(main)
    if place.point in (Point.UNKNOWN, Point.SUBPROCESS) or not place.stuck:
        better = _other_thread(dump.threads, main)
        if better is not None and (place.point is Point.UNKNOWN or better.stuck):
            place = better
    if place.point is Point.UNKNOWN and wait_syscall in _SLEEP_SYSCALLS:
        place = Place(
            Point.RETRY_SLEEP,
            "a sleep (a retry loop?)",
            True,
            True,
            place.path,
            place.frame,
            place.detail,
            place.thread,
        )
    return place


def place_of_thread(thread: ThreadStack) -> Place:
    """The place of one thread's stack (frames innermost first)."""
    frames = thread.frames
    for index, frame in enumerate(frames):
        entry = point_of(frame.function, frame.filename)
        if frame.function == "<module>" and _imported(frames[index + 1 :]):
            entry = IMPORTING  # a module body below the script: an import is running it
        if entry is None:
            continue
        if entry.point is Point.SUBPROCESS:
            outer = _outer_point(frames[index + 1 :])
            if outer is not None and outer.point is Point.JIT:
                entry = Entry(Point.JIT, outer.words + ": waiting for the compiler", waiting=False)
        return Place(
            point=entry.point,
            words=entry.words,
            waiting=entry.waiting,
            stuck=entry.stuck,
            path=_path(frames[index + 1 :]),
            frame=frame,
            detail=_detail(frames[index:]),
            thread=thread.name or "",
        )
    innermost = frames[0] if frames else None
    return Place(
        Point.UNKNOWN,
        "a place not in the catalogue",
        False,
        False,
        _path(frames),
        innermost,
        thread=thread.name or "",
    )


def _imported(outer: Sequence[Frame]) -> bool:
    """A module body with frames outside it runs as an import, unless runpy runs it as the
    program (``python -m sglang.launch_server``: ``_run_code`` calls it)."""
    return bool(outer) and not (outer[0].function == "_run_code" and "runpy" in outer[0].filename)


def _outer_point(frames: Sequence[Frame]) -> Entry | None:
    for frame in frames:
        entry = point_of(frame.function, frame.filename)
        if entry is not None and entry.point is not Point.SUBPROCESS:
            return entry
    return None


def _other_thread(threads: Iterable[ThreadStack], main: ThreadStack) -> Place | None:
    found = [place_of_thread(t) for t in threads if t is not main]
    known = [p for p in found if p.point is not Point.UNKNOWN and p.stuck]
    return known[0] if known else None


def _path(outer_frames: Sequence[Frame]) -> tuple[str, ...]:
    """Start-up steps from the outermost in (``load_model``, ``load_weights``)."""
    steps: list[str] = []
    for frame in reversed(outer_frames):
        step = phase_of(frame.function, frame.filename)
        if step is not None and step not in steps:
            steps.append(step)
    return tuple(steps)


def _detail(frames: Sequence[Frame]) -> str:
    """A file named by the locals of the stuck frame or the frames just outside it."""
    for frame in frames[:4]:
        for name in _FILE_LOCALS:
            value = frame.local(name)
            if value and ("/" in value or "." in value) and len(value) < 400:
                return value.rsplit("/", 1)[-1] if name != "repo_id" else value
    return ""


def fold(places: Iterable[RankPlace]) -> tuple[Fold, ...]:
    """Group ranks in the same place; groups in order of their first rank."""
    groups: dict[tuple[object, ...], list[RankPlace]] = {}
    for item in places:
        key = item.place.key if item.place is not None else ("failed", item.failure)
        groups.setdefault(key, []).append(item)
    return tuple(
        Fold(
            compress_labels([m.label for m in members]),
            tuple(m.pid for m in members),
            members[0].place,
            members[0].failure,
        )
        for members in groups.values()
    )


def describe_folds(folds: Sequence[Fold]) -> str:
    """``TP0-6 in barrier(); TP7 in load_weights → reading weights (safetensors)``."""
    return "; ".join(f.describe() for f in folds)


def compress_labels(labels: Sequence[str]) -> str:
    """``TP0, TP1, TP2, TP5`` → ``TP0-2, TP5``; ``DP0 TP0, DP0 TP1`` → ``DP0 TP0-1``."""
    runs: list[tuple[str, int, int]] = []
    others: list[str] = []
    for label in labels:
        match = _RANK.match(label)
        if match is None:
            others.append(label)
            continue
        prefix, number = match[1], int(match[2])
        if runs and runs[-1][0] == prefix and runs[-1][2] == number - 1:
            runs[-1] = (prefix, runs[-1][1], number)
        else:
            runs.append((prefix, number, number))
    texts = [f"{p}{a}" if a == b else f"{p}{a}-{b}" for p, a, b in runs]
    return ", ".join(texts + others)


@dataclass(frozen=True)
class StackReport:
    """Every rank's stack at one moment (``at``: the caller's clock), folded.

    ``failures`` says once why some stacks could not be taken (no ptrace permission, with
    the fix), so a verdict carries on with the rest of the evidence.
    """

    at: float
    folds: tuple[Fold, ...]
    failures: tuple[str, ...] = ()
    elapsed_s: float = 0.0

    def describe(self) -> str:
        """``TP0-6 in barrier(); TP7 in …`` (and why some are missing)."""
        text = describe_folds([f for f in self.folds if f.place is not None])
        if self.failures:
            text += ("; " if text else "") + "; ".join(self.failures)
        return clean(text) or "no stack"  # others' function names and paths


StackDumper = Callable[[int], StackDump]


def take_stacks(
    targets: Sequence[tuple[str, int, str | None]], at: float, dumper: StackDumper | None = None
) -> StackReport:
    """Dump and classify each ``(label, pid, wait_syscall)``; one failure line per kind of
    failure (a permission problem is said once, with its fix). It can take seconds: call it
    off the event loop."""
    dump = dumper or _default_dumper
    places: list[RankPlace] = []
    failures: dict[str, str] = {}
    started = time.monotonic()
    for label, pid, syscall in targets:
        result = dump(pid)
        if result.ok:
            places.append(RankPlace(label, pid, classify(result, syscall)))
            continue
        reason = f"{result.status.value}" + (f": {result.fix}" if result.fix else "")
        failures.setdefault(reason, f"no stack for {label} (PID {pid}): {reason}")
    return StackReport(at, fold(places), tuple(failures.values()), time.monotonic() - started)


def _default_dumper(pid: int) -> StackDump:
    return pyspy.dump(pid)


def stack_targets(tree: TreeEvidence) -> list[tuple[str, int, str | None]]:
    """Whose stacks say where a start-up is: every rank; without ranks (a single-process
    server), every Python process of the tree but compilers."""
    chosen = tree.ranks or tuple(
        p for p in tree.processes
        if p.role.kind is not Kind.COMPILER and p.state is not State.ZOMBIE
    )
    return [(p.label, p.pid, p.blocked.syscall if p.blocked else None) for p in chosen]
